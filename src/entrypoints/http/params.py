"""The query and path parameters several routes share, each declared once with its
documentation and the rule the edge checks it by (`validation`): the same name means the same
thing on every route."""

from __future__ import annotations

from domain.agents import AGENT_ID_REQUIRED, TAG_ID_REQUIRED
from domain.conversations import THREAD_ID_INVALID
from domain.files import FILE_ID_REQUIRED
from domain.ids import MAX_BIGINT
from domain.knowledge_bases import KB_ID_REQUIRED
from domain.skills import SKILL_ID_REQUIRED
from domain.tool_servers import TOOL_SERVER_ID_REQUIRED
from entrypoints.http.rules import ParamRule, RuledPath, RuledQuery, positive_id, uuid


def _id(name: str, what: str, message: str | None = None) -> RuledQuery:
    return RuledQuery(
        name=name,
        ge=1,
        le=MAX_BIGINT,
        description=f"The {what}'s id, a positive integer",
        rule=None if message is None else ParamRule(message, positive_id),
    )


KB_ID = _id("kbId", "knowledge base", KB_ID_REQUIRED)
AGENT_ID = _id("agentId", "agent", AGENT_ID_REQUIRED)
TAG_ID = _id("tagId", "tag", TAG_ID_REQUIRED)
SKILL_ID = _id("skillId", "skill", SKILL_ID_REQUIRED)
TOOL_SERVER_ID = _id("toolServerId", "tool server", TOOL_SERVER_ID_REQUIRED)
TASK_ID = _id("taskId", "scheduled task")
FILE_ID = RuledQuery(
    name="fileId", description="The file's uuid", rule=ParamRule(FILE_ID_REQUIRED, uuid)
)
THREAD_ID = RuledQuery(
    name="threadId",
    description="The conversation's uuid",
    rule=ParamRule(THREAD_ID_INVALID, uuid),
)
THREAD_PATH = RuledPath(
    description="The conversation's uuid", rule=ParamRule(THREAD_ID_INVALID, uuid)
)
