"""`AgentRepository` on an organization-scoped asyncpg connection.

As in `knowledge_bases.py`: fixed statements, every one filtering by `org_id` (row-level
security is the second wall), rows read by position. An agent is read with its knowledge-base
ids (in link order) and its tags (by name) in one statement, whether one agent or a list. Its
skill ids are read as the stored ones that are active skills of the organization, in stored
order: a soft-deleted skill drops out of every agent listing it, the stored array unchanged.
Links are only ever made to knowledge bases and tags of the same organization. The tools an
agent may call are a jsonb list of `{toolServerId, names}` (names null for all), the shape
migration 0024 gives the column and deleting a tool server edits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapters.postgres.database import OrgConnection
from domain.agents import Agent, AgentTag, NewAgent
from domain.errors import Conflict
from domain.tool_servers import ToolGrant

DUPLICATE_TAG = "A tag with this name already exists"
AGENT_COLUMNS_UPDATABLE = (
    "name",
    "description",
    "role",
    "model",
    "skill_ids",
    "knowledge_filters",
    "tools",
)
LINK_FIELDS = frozenset({"knowledge_base_ids", "tag_ids"})
TAG_ORDER = "g.name, g.id"

SELECT_AGENTS = f"""
    SELECT a.id, a.org_id, a.user_id, a.name, a.description, a.role, a.model,
           ARRAY(SELECT u.id FROM unnest(a.skill_ids) WITH ORDINALITY AS u(id, ord)
                 JOIN skills s ON s.id = u.id AND s.org_id = $1 AND s.deleted_at IS NULL
                 ORDER BY u.ord),
           a.created_at, a.updated_at,
           ARRAY(SELECT l.knowledge_base_id FROM agent_knowledge_bases l
                 WHERE l.org_id = $1 AND l.agent_id = a.id
                 ORDER BY l.position, l.knowledge_base_id),
           tg.ids, tg.names, tg.colors, tg.created, a.knowledge_filters, a.tools
    FROM agents a
    LEFT JOIN LATERAL (
        SELECT array_agg(g.id ORDER BY {TAG_ORDER}) AS ids,
               array_agg(g.name ORDER BY {TAG_ORDER}) AS names,
               array_agg(g.color ORDER BY {TAG_ORDER}) AS colors,
               array_agg(g.created_at ORDER BY {TAG_ORDER}) AS created
        FROM agent_tag_links tl
        JOIN agent_tags g ON g.id = tl.tag_id AND g.org_id = $1
        WHERE tl.org_id = $1 AND tl.agent_id = a.id
    ) tg ON true
    WHERE a.org_id = $1"""
GET_AGENT = SELECT_AGENTS + " AND a.id = $2"
LIST_AGENTS = (
    SELECT_AGENTS
    + """ AND ($2::bigint IS NULL OR EXISTS (
        SELECT 1 FROM agent_tag_links f WHERE f.org_id = $1 AND f.agent_id = a.id
        AND f.tag_id = $2))
    ORDER BY a.created_at DESC, a.id DESC"""
)
# Knowledge bases and tags of another organization are dropped by the joins even if a caller
# skipped the use case's check.
LINK_KNOWLEDGE_BASES = """
    INSERT INTO agent_knowledge_bases (org_id, agent_id, knowledge_base_id, position)
    SELECT kb.org_id, $2, kb.id, (u.ord - 1)::int
    FROM unnest($3::bigint[]) WITH ORDINALITY AS u(kb_id, ord)
    JOIN knowledge_bases kb ON kb.id = u.kb_id AND kb.org_id = $1"""
LINK_TAGS = """
    INSERT INTO agent_tag_links (org_id, agent_id, tag_id)
    SELECT g.org_id, $2, g.id FROM agent_tags g WHERE g.org_id = $1 AND g.id = ANY($3::bigint[])"""
INSERT_AGENT = """
    WITH a AS (
        INSERT INTO agents (org_id, user_id, name, description, role, model, skill_ids,
                            knowledge_filters, tools)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $10, $11) RETURNING id
    ), k AS (
        INSERT INTO agent_knowledge_bases (org_id, agent_id, knowledge_base_id, position)
        SELECT kb.org_id, a.id, kb.id, (u.ord - 1)::int
        FROM a CROSS JOIN unnest($8::bigint[]) WITH ORDINALITY AS u(kb_id, ord)
        JOIN knowledge_bases kb ON kb.id = u.kb_id AND kb.org_id = $1
    ), t AS (
        INSERT INTO agent_tag_links (org_id, agent_id, tag_id)
        SELECT g.org_id, a.id, g.id FROM a CROSS JOIN agent_tags g
        WHERE g.org_id = $1 AND g.id = ANY($9::bigint[])
    )
    SELECT id FROM a"""
UNLINK_KNOWLEDGE_BASES = "DELETE FROM agent_knowledge_bases WHERE org_id = $1 AND agent_id = $2"
UNLINK_TAGS = "DELETE FROM agent_tag_links WHERE org_id = $1 AND agent_id = $2"
DELETE_AGENT = "DELETE FROM agents WHERE org_id = $1 AND id = $2 RETURNING id"
INSERT_TAG = """
    INSERT INTO agent_tags (org_id, name, color) VALUES ($1, $2, $3)
    ON CONFLICT ON CONSTRAINT uq_agent_tags_org_name DO NOTHING
    RETURNING id, org_id, name, color, created_at"""
LIST_TAGS = (
    "SELECT g.id, g.org_id, g.name, g.color, g.created_at FROM agent_tags g "
    f"WHERE g.org_id = $1 ORDER BY {TAG_ORDER}"
)
DELETE_TAG = "DELETE FROM agent_tags WHERE org_id = $1 AND id = $2 RETURNING id"
MISSING_TAGS = """
    SELECT u.id FROM unnest($2::bigint[]) WITH ORDINALITY AS u(id, ord)
    WHERE NOT EXISTS (SELECT 1 FROM agent_tags g WHERE g.org_id = $1 AND g.id = u.id)
    ORDER BY u.ord"""


def _update_sql(columns: tuple[str, ...]) -> str:
    assignments = "".join(f"{name} = ${i}, " for i, name in enumerate(columns, start=3))
    return (
        f"UPDATE agents SET {assignments}updated_at = now() "
        "WHERE org_id = $1 AND id = $2 RETURNING id"
    )


def _agent(r: Any) -> Agent:
    tag_ids, names, colors, created = r[11], r[12], r[13], r[14]
    tags = [
        AgentTag(id=tag_ids[i], org_id=r[1], name=names[i], color=colors[i], created_at=created[i])
        for i in range(len(tag_ids or ()))
    ]
    return Agent(
        id=r[0], org_id=r[1], user_id=r[2], name=r[3], description=r[4], role=r[5], model=r[6],
        skill_ids=list(r[7]), created_at=r[8], updated_at=r[9], knowledge_base_ids=list(r[10]),
        tags=tags, knowledge_filters=r[15], tools=_grants(r[16]),
    )  # fmt: skip


def _grants(stored: Any) -> tuple[ToolGrant, ...]:
    return tuple(
        ToolGrant(
            tool_server_id=int(g["toolServerId"]),
            names=None if g.get("names") is None else tuple(g["names"]),
        )
        for g in stored or ()
    )


def _stored_grants(grants: tuple[ToolGrant, ...]) -> list[dict[str, Any]]:
    return [
        {"toolServerId": g.tool_server_id, "names": None if g.names is None else list(g.names)}
        for g in grants
    ]


def _tag(r: Any) -> AgentTag:
    return AgentTag(id=r[0], org_id=r[1], name=r[2], color=r[3], created_at=r[4])


class PgAgentRepository:
    """`AgentRepository` in Postgres."""

    def __init__(self, db: OrgConnection) -> None:
        self._db = db

    async def add(self, new: NewAgent) -> Agent:
        (row,) = await self._db.fetch_in_transaction(
            INSERT_AGENT, new.org_id, new.user_id, new.name, new.description, new.role,
            new.model, new.skill_ids, new.knowledge_base_ids, new.tag_ids, new.knowledge_filters,
            _stored_grants(new.tools),
        )  # fmt: skip
        agent = await self.get(new.org_id, row[0])
        assert agent is not None
        return agent

    async def get(self, org_id: str, agent_id: int) -> Agent | None:
        rows = await self._db.fetch(GET_AGENT, org_id, agent_id)
        return _agent(rows[0]) if rows else None

    async def list_all(self, org_id: str, *, tag_id: int | None = None) -> list[Agent]:
        return [_agent(r) for r in await self._db.fetch(LIST_AGENTS, org_id, tag_id)]

    async def update(self, org_id: str, agent_id: int, changes: Mapping[str, Any]) -> Agent | None:
        unknown = set(changes) - set(AGENT_COLUMNS_UPDATABLE) - LINK_FIELDS
        if unknown:
            raise ValueError(f"not updatable: {sorted(unknown)}")
        columns = tuple(name for name in AGENT_COLUMNS_UPDATABLE if name in changes)
        if "tools" in changes:
            changes = {**changes, "tools": _stored_grants(changes["tools"])}
        rows = await self._db.fetch_in_transaction(
            _update_sql(columns), org_id, agent_id, *(changes[name] for name in columns)
        )
        if not rows:
            return None
        if "knowledge_base_ids" in changes:
            await self._db.execute(UNLINK_KNOWLEDGE_BASES, org_id, agent_id)
            await self._db.execute(
                LINK_KNOWLEDGE_BASES, org_id, agent_id, changes["knowledge_base_ids"]
            )
        if "tag_ids" in changes:
            await self._db.execute(UNLINK_TAGS, org_id, agent_id)
            await self._db.execute(LINK_TAGS, org_id, agent_id, changes["tag_ids"])
        return await self.get(org_id, agent_id)

    async def delete(self, org_id: str, agent_id: int) -> bool:
        return bool(await self._db.fetch_in_transaction(DELETE_AGENT, org_id, agent_id))

    async def add_tag(self, org_id: str, name: str, color: str | None) -> AgentTag:
        rows = await self._db.fetch_in_transaction(INSERT_TAG, org_id, name, color)
        if not rows:
            raise Conflict(DUPLICATE_TAG)
        return _tag(rows[0])

    async def list_tags(self, org_id: str) -> list[AgentTag]:
        return [_tag(r) for r in await self._db.fetch(LIST_TAGS, org_id)]

    async def delete_tag(self, org_id: str, tag_id: int) -> bool:
        return bool(await self._db.fetch_in_transaction(DELETE_TAG, org_id, tag_id))

    async def missing_tags(self, org_id: str, tag_ids: list[int]) -> list[int]:
        if not tag_ids:
            return []
        return [r[0] for r in await self._db.fetch(MISSING_TAGS, org_id, tag_ids)]
