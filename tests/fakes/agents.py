"""A fake `AgentRepository` in memory, with the organization scoping of the real one."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from domain.agents import Agent, AgentTag, NewAgent
from domain.errors import Conflict

if TYPE_CHECKING:
    from application.ports.agent_repository import AgentRepository
    from tests.fakes.basics import Restorable

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)

AgentsState = tuple[dict[int, dict[str, Any]], dict[int, AgentTag], int, int]


class FakeAgents:
    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}
        self.tags: dict[int, AgentTag] = {}
        self._next = 1
        self._clock = 0

    def snapshot(self) -> AgentsState:
        return copy.deepcopy((self.rows, self.tags, self._next, self._clock))

    def restore(self, saved: AgentsState) -> None:
        self.rows, self.tags, self._next, self._clock = copy.deepcopy(saved)

    def _tick(self) -> datetime:
        self._clock += 1
        return EPOCH + timedelta(seconds=self._clock)

    def _agent(self, row: dict[str, Any]) -> Agent:
        tags = sorted(
            (self.tags[t] for t in row["tag_ids"] if t in self.tags),
            key=lambda t: (t.name, t.id),
        )
        fields = {k: v for k, v in row.items() if k != "tag_ids"}
        return Agent(tags=tags, **copy.deepcopy(fields))

    async def add(self, new: NewAgent) -> Agent:
        now = self._tick()
        row = {f.name: copy.deepcopy(getattr(new, f.name)) for f in dataclasses.fields(new)}
        row.update(id=self._next, created_at=now, updated_at=now)
        self.rows[self._next] = row
        self._next += 1
        return self._agent(row)

    async def get(self, org_id: str, agent_id: int) -> Agent | None:
        row = self.rows.get(agent_id)
        return self._agent(row) if row and row["org_id"] == org_id else None

    async def list_all(self, org_id: str, *, tag_id: int | None = None) -> list[Agent]:
        rows = [
            r
            for r in self.rows.values()
            if r["org_id"] == org_id and (tag_id is None or tag_id in r["tag_ids"])
        ]
        return [self._agent(r) for r in sorted(rows, key=lambda r: r["id"], reverse=True)]

    async def update(self, org_id: str, agent_id: int, changes: Mapping[str, Any]) -> Agent | None:
        row = self.rows.get(agent_id)
        if row is None or row["org_id"] != org_id:
            return None
        row.update(copy.deepcopy(dict(changes)), updated_at=self._tick())
        return self._agent(row)

    async def delete(self, org_id: str, agent_id: int) -> bool:
        if await self.get(org_id, agent_id) is None:
            return False
        del self.rows[agent_id]
        return True

    async def add_tag(self, org_id: str, name: str, color: str | None) -> AgentTag:
        if any(t.org_id == org_id and t.name == name for t in self.tags.values()):
            raise Conflict("A tag with this name already exists")
        tag = AgentTag(
            id=self._next, org_id=org_id, name=name, color=color, created_at=self._tick()
        )
        self.tags[tag.id] = tag
        self._next += 1
        return tag

    async def list_tags(self, org_id: str) -> list[AgentTag]:
        tags = [t for t in self.tags.values() if t.org_id == org_id]
        return sorted(tags, key=lambda t: (t.name, t.id))

    async def delete_tag(self, org_id: str, tag_id: int) -> bool:
        tag = self.tags.get(tag_id)
        if tag is None or tag.org_id != org_id:
            return False
        del self.tags[tag_id]
        for row in self.rows.values():
            row["tag_ids"] = [t for t in row["tag_ids"] if t != tag_id]
        return True

    async def missing_tags(self, org_id: str, tag_ids: list[int]) -> list[int]:
        return [t for t in tag_ids if t not in self.tags or self.tags[t].org_id != org_id]


AN_AGENT = Agent(
    id=7,
    org_id="org_a",
    user_id="user_1",
    name="Helper",
    description="Answers questions about the handbook.",
    role="You answer briefly.",
    model="openai:gpt-4o-mini",
    knowledge_base_ids=[],
    skill_ids=[],
    tags=[],
    created_at=datetime(2026, 1, 1, tzinfo=UTC),
    updated_at=datetime(2026, 1, 1, tzinfo=UTC),
)


def an_agent(**changes: Any) -> Agent:
    """Agent 7 of `org_a` on `openai:gpt-4o-mini`, with no knowledge base or skill, but for
    `changes`."""
    return dataclasses.replace(AN_AGENT, **changes)


if TYPE_CHECKING:  # mypy checks the fake against the port it stands in for
    _agents: AgentRepository = FakeAgents()
    _agents_store: Restorable[AgentsState] = FakeAgents()
