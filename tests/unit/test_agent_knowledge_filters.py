"""An agent's knowledge filters with fakes: parsed and kept as sent, and passed to every search
the agent makes of its knowledge bases, which the model's tool call cannot widen."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from application.agent.prompt import search_passages
from application.ports.agent_tool import ToolContext
from application.tools.knowledge_search import KnowledgeSearchTool
from application.use_cases.create_agent import CreateAgent, CreateAgentCommand
from application.use_cases.update_agent import UpdateAgent, UpdateAgentCommand
from domain.agents import AgentChanges, AgentFields, parse_knowledge_filters
from domain.conversations import StoredMessage
from domain.errors import Invalid
from domain.identity import ADMIN_ROLE, Caller
from domain.search import Condition, Group, parse_filters
from domain.values import UNSET
from tests.fakes import FakeKnowledgeBases, FakeUnitOfWork
from tests.fakes.agents import FakeAgents, an_agent
from tests.fakes.chat import FakeKnowledgeSearch
from tests.fakes.skills import FakeSkillRepository

CALLER = Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)
TEAM_HR: dict[str, Any] = {"key": "team", "op": "eq", "value": "hr"}
SMALL_HR: dict[str, Any] = {
    "and": [TEAM_HR, {"key": "fileSize", "op": "lt", "value": 1000}],
}


def question(text: str) -> StoredMessage:
    return StoredMessage(
        id="m1",
        thread_id="t1",
        role="user",
        parts=[{"type": "text", "text": text}],
        created_at=datetime(2026, 1, 1, tzinfo=UTC),
    )


# The field


def test_filters_are_kept_as_sent_and_null_is_no_limit():
    assert parse_knowledge_filters(SMALL_HR) is SMALL_HR
    assert parse_knowledge_filters(None) is None
    assert AgentFields.parse(name="A", knowledge_filters=SMALL_HR).knowledge_filters == SMALL_HR
    assert AgentFields.parse(name="A").knowledge_filters is None
    assert AgentChanges.parse(knowledge_filters=None).knowledge_filters is None
    assert AgentChanges.parse(name="A").knowledge_filters is UNSET


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ({"key": "team", "op": "like", "value": "hr"}, "unknown operator"),
        ({"key": "fileSize", "op": "eq", "value": "big"}, "fileSize compares with a number"),
        ({"or": [TEAM_HR] * 51}, "more than 50 conditions"),
        ([TEAM_HR], "each filter is an object"),
        ({"or": [{"key": "a\x00", "op": "eq", "value": 1}]}, "a key holds no NUL character"),
    ],
)
def test_invalid_filters_name_the_agents_field(value, why):
    with pytest.raises(Invalid) as refused:
        AgentFields.parse(name="A", knowledge_filters=value)
    assert refused.value.message.startswith("filters are invalid: ")
    assert why in refused.value.message
    (detail,) = refused.value.details
    assert detail["field"] == "knowledgeFilters" and why in str(detail["message"])


def test_the_agent_reads_its_filter():
    assert an_agent().knowledge_filter() is None
    assert an_agent(knowledge_filters=SMALL_HR).knowledge_filter() == Group(
        "and", (Condition("team", "eq", "hr"), Condition("fileSize", "lt", 1000, "fileSize"))
    )


async def test_create_and_update_store_the_filters_and_null_clears_them():
    agents, kbs = FakeAgents(), FakeKnowledgeBases()
    uow, skills = FakeUnitOfWork(agents, kbs), FakeSkillRepository()
    created = await CreateAgent(agents, kbs, skills, uow).execute(
        CreateAgentCommand.parse(caller=CALLER, name="A", knowledge_filters=TEAM_HR)
    )
    assert created.knowledge_filters == TEAM_HR
    update = UpdateAgent(agents, kbs, skills, uow)
    renamed = await update.execute(
        UpdateAgentCommand.parse(caller=CALLER, agent_id=created.id, name="B")
    )
    assert renamed.knowledge_filters == TEAM_HR
    cleared = await update.execute(
        UpdateAgentCommand.parse(caller=CALLER, agent_id=created.id, knowledge_filters=None)
    )
    assert cleared.knowledge_filters is None
    stored = await agents.get("org_a", created.id)
    assert stored is not None and stored.knowledge_filters is None


# The searches


async def test_the_prompts_passages_come_through_the_agents_filter():
    search = FakeKnowledgeSearch()
    agent = an_agent(knowledge_base_ids=[1], knowledge_filters=SMALL_HR)
    await search_passages(search, CALLER, agent, [question("Leave?")])
    assert search.queries == [([1], "Leave?", 4)]
    assert search.filters == [parse_filters(SMALL_HR)]


async def test_an_agent_without_filters_searches_every_file():
    search = FakeKnowledgeSearch()
    the_agent = an_agent(knowledge_base_ids=[1])
    await search_passages(search, CALLER, the_agent, [question("Leave?")])
    offer = await KnowledgeSearchTool(search).offer(CALLER, the_agent)
    assert offer is not None
    await offer.execute({"query": "leave"}, ToolContext(caller=CALLER, agent=the_agent))
    assert search.filters == [None, None]


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "leave"},
        # What a model might add to widen its search: the tool reads only the query.
        {"query": "leave", "filters": None},
        {"query": "leave", "filters": {"key": "team", "op": "eq", "value": "ops"}},
        {"query": "leave", "knowledgeFilters": None, "kbIds": [1, 2, 3]},
    ],
)
async def test_the_tool_searches_through_the_agents_filter_whatever_the_call_holds(arguments):
    search = FakeKnowledgeSearch()
    the_agent = an_agent(knowledge_base_ids=[1], knowledge_filters=SMALL_HR)
    offer = await KnowledgeSearchTool(search).offer(CALLER, the_agent)
    assert offer is not None
    assert "filters" not in offer.spec.parameters["properties"]
    await offer.execute(arguments, ToolContext(caller=CALLER, agent=the_agent))
    assert search.queries == [([1], "leave", 6)]
    assert search.filters == [parse_filters(SMALL_HR)]
