"""A fake `KnowledgeBaseRepository` in memory; given a `FakeFiles`, its summaries count that
fake's files and deleting a knowledge base deletes them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseSummary, NewKnowledgeBase
from tests.fakes.files import FakeFiles

if TYPE_CHECKING:
    from application.ports.knowledge_base_repository import KnowledgeBaseRepository
    from tests.fakes.basics import Restorable

KnowledgeBasesState = tuple[dict[int, KnowledgeBase], int]


class FakeKnowledgeBases:
    def __init__(self, files: FakeFiles | None = None) -> None:
        self.rows: dict[int, KnowledgeBase] = {}
        self.files = files
        self._next = 1

    def snapshot(self) -> KnowledgeBasesState:
        return dict(self.rows), self._next

    def restore(self, saved: KnowledgeBasesState) -> None:
        self.rows, self._next = dict(saved[0]), saved[1]

    async def add(self, new: NewKnowledgeBase) -> KnowledgeBase:
        now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self._next)
        kb = KnowledgeBase(
            id=self._next,
            trigger=None,
            pending_embedding_model=None,
            pending_embedding_dimensions=None,
            reindex_error=None,
            created_at=now,
            updated_at=now,
            **{f.name: getattr(new, f.name) for f in dataclasses.fields(new)},
        )
        self.rows[kb.id] = kb
        self._next += 1
        return kb

    async def get(
        self, org_id: str, kb_id: int, *, for_update: bool = False, for_share: bool = False
    ) -> KnowledgeBase | None:
        kb = self.rows.get(kb_id)
        return kb if kb and kb.org_id == org_id else None

    def _summary(self, kb: KnowledgeBase) -> KnowledgeBaseSummary:
        files = [
            f
            for f in (self.files.rows.values() if self.files else [])
            if f.knowledge_base_id == kb.id
        ]
        return KnowledgeBaseSummary.of(
            kb,
            file_count=len(files),
            total_size=sum(f.file_size or 0 for f in files),
            last_file_uploaded_at=max((f.created_at for f in files), default=None),
            files_in_progress=sum(1 for f in files if not f.processing_status.is_terminal),
        )

    async def list_summaries(self, org_id: str) -> list[KnowledgeBaseSummary]:
        kbs = [kb for kb in self.rows.values() if kb.org_id == org_id]
        return [self._summary(kb) for kb in sorted(kbs, key=lambda k: k.id, reverse=True)]

    async def get_summary(self, org_id: str, kb_id: int) -> KnowledgeBaseSummary | None:
        kb = await self.get(org_id, kb_id)
        return self._summary(kb) if kb else None

    async def update(self, org_id: str, kb_id: int, changes: Mapping[str, Any]) -> KnowledgeBase:
        kb = await self.get(org_id, kb_id)
        assert kb is not None
        self.rows[kb_id] = dataclasses.replace(kb, **changes)
        return self.rows[kb_id]

    async def delete(self, org_id: str, kb_id: int) -> None:
        if await self.get(org_id, kb_id):
            del self.rows[kb_id]
            if self.files:
                self.files.rows = {
                    k: f for k, f in self.files.rows.items() if f.knowledge_base_id != kb_id
                }


if TYPE_CHECKING:  # mypy checks the fake against the port it stands in for
    _knowledge_bases: KnowledgeBaseRepository = FakeKnowledgeBases()
    _knowledge_bases_store: Restorable[KnowledgeBasesState] = FakeKnowledgeBases()
