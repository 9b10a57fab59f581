from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseSummary, NewKnowledgeBase


class KnowledgeBaseRepository(Protocol):
    """Knowledge bases of one organization.

    Every method takes the organization id and never returns or touches a row of another
    organization: asking for a foreign knowledge base behaves exactly like asking for a
    missing one.
    """

    async def add(self, new: NewKnowledgeBase) -> KnowledgeBase:
        """Insert a knowledge base and return it with its id and timestamps."""
        ...

    async def get(
        self, org_id: str, kb_id: int, *, for_update: bool = False, for_share: bool = False
    ) -> KnowledgeBase | None:
        """The knowledge base, or None; `for_update` locks it until the transaction ends,
        `for_share` only against changes (others may take the same lock)."""
        ...

    async def list_summaries(self, org_id: str) -> list[KnowledgeBaseSummary]:
        """Every knowledge base of the organization with its file figures, newest first."""
        ...

    async def get_summary(self, org_id: str, kb_id: int) -> KnowledgeBaseSummary | None:
        """One knowledge base with its file figures, or None."""
        ...

    async def update(self, org_id: str, kb_id: int, changes: Mapping[str, Any]) -> KnowledgeBase:
        """Set the given fields (domain attribute names) and bump `updated_at`."""
        ...

    async def delete(self, org_id: str, kb_id: int) -> None:
        """Delete the knowledge base and, with it, its file records."""
        ...
