from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from domain.agents import Agent, AgentTag, NewAgent


class AgentRepository(Protocol):
    """Agents and agent tags of one organization.

    Every method takes the organization id and never returns or touches a row of another
    organization: a foreign agent or tag behaves exactly like a missing one.
    """

    async def add(self, new: NewAgent) -> Agent:
        """Insert an agent with its knowledge-base and tag links; return it with its tags."""
        ...

    async def get(self, org_id: str, agent_id: int) -> Agent | None:
        """The agent with its tags, or None."""
        ...

    async def list_all(self, org_id: str, *, tag_id: int | None = None) -> list[Agent]:
        """The organization's agents (optionally only those with a tag), newest first."""
        ...

    async def update(self, org_id: str, agent_id: int, changes: Mapping[str, Any]) -> Agent | None:
        """Set the given fields (domain attribute names; `knowledge_base_ids` and `tag_ids`
        replace the links) and bump `updated_at`; None when the agent does not exist."""
        ...

    async def delete(self, org_id: str, agent_id: int) -> bool:
        """Delete the agent; its conversations stay and lose the link. False if missing."""
        ...

    async def add_tag(self, org_id: str, name: str, color: str | None) -> AgentTag:
        """Insert a tag; `Conflict` when the organization already has one of that name."""
        ...

    async def list_tags(self, org_id: str) -> list[AgentTag]:
        """The organization's tags, by name."""
        ...

    async def delete_tag(self, org_id: str, tag_id: int) -> bool:
        """Delete a tag and take it off every agent. False if missing."""
        ...

    async def missing_tags(self, org_id: str, tag_ids: list[int]) -> list[int]:
        """Those of `tag_ids` that are not tags of the organization."""
        ...
