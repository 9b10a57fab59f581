from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from application.ports.chunk_repository import ChunkRepository
from application.ports.job_queue import REEMBED_KNOWLEDGE_BASE, Job, JobQueue
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.chunks import check_chunking
from domain.errors import NotFound
from domain.identity import Caller
from domain.inbound_email import NO_INBOUND_EMAIL, InboundEmailDomain
from domain.knowledge_bases import (
    EMAIL_SOURCE,
    KB_NOT_FOUND,
    KnowledgeBaseChanges,
    KnowledgeBaseSummary,
    parse_kb_id,
)
from domain.models import embedding_dimensions
from domain.values import UNSET, Unset, sent_values


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateKnowledgeBaseCommand:
    caller: Caller
    kb_id: int
    changes: KnowledgeBaseChanges

    @classmethod
    def parse(
        cls, *, caller: Caller, kb_id: object, **fields: object
    ) -> UpdateKnowledgeBaseCommand:
        """The id (400 "Valid knowledge base ID is required"), then the fields sent
        (`KnowledgeBaseChanges.parse`)."""
        return cls(
            caller=caller, kb_id=parse_kb_id(kb_id), changes=KnowledgeBaseChanges.parse(**fields)
        )


class UpdateKnowledgeBase:
    """Change the fields the caller sent; fields not sent stay as they are.

    Rules: a missing or foreign knowledge base is 404 "Knowledge base not found". `null` clears
    the extraction model or schema; new chunking settings are checked against the settings they
    keep (the overlap under half the size). New
    chunking settings apply to files processed from then on (reprocess a file to re-split it).
    Changing the embedding model of a knowledge base without files takes effect at once. With
    files, the new model is recorded as pending and a re-embedding job is queued: search keeps
    answering from the current index and the status is `reindexing` until the job swaps it in.
    `source: "email"` gives the knowledge base an address (one it has already is kept; 400
    when AP_INBOUND_EMAIL_DOMAIN is unset), `source: null` removes it: mail to the old address
    then finds no knowledge base. A new language rewrites the full-text index of every passage
    of the knowledge base in the same transaction, so that search stems in it at once.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        chunks: ChunkRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        inbound: InboundEmailDomain = NO_INBOUND_EMAIL,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._chunks = chunks
        self._jobs = jobs
        self._uow = uow
        self._inbound = inbound

    async def execute(self, command: UpdateKnowledgeBaseCommand) -> KnowledgeBaseSummary:
        org_id, kb_id = command.caller.org_id, command.kb_id
        changes = sent_values(command.changes)
        # The fields whose effect depends on the knowledge base as it is; the rest are stored.
        source = changes.pop("source", UNSET)
        model = changes.pop("embedding_model", None)
        dimensions = changes.pop("embedding_dimensions", None)
        size = changes.pop("chunk_size", None)
        overlap = changes.pop("chunk_overlap", None)
        language = changes.pop("language", None)
        new_model = None if model is None else (model, embedding_dimensions(model, dimensions))

        kb = await self._knowledge_bases.get(org_id, kb_id, for_update=True)
        if kb is None:
            raise NotFound(KB_NOT_FOUND)
        changes.update(self._source_changes(kb.inbound_email_address, source))
        if language is not None and language != kb.language:
            changes["language"] = language
        if size is not None or overlap is not None:
            changes["chunk_size"], changes["chunk_overlap"] = check_chunking(
                kb.chunk_size if size is None else size,
                kb.chunk_overlap if overlap is None else overlap,
            )
        if new_model is not None and new_model != (kb.embedding_model, kb.embedding_dimensions):
            summary = await self._knowledge_bases.get_summary(org_id, kb_id)
            if summary is not None and summary.file_count > 0:
                changes["pending_embedding_model"], changes["pending_embedding_dimensions"] = (
                    new_model
                )
                changes["reindex_error"] = None
                await self._jobs.enqueue(
                    Job(
                        kind=REEMBED_KNOWLEDGE_BASE,
                        payload={"orgId": org_id, "kbId": kb_id},
                        dedupe_key=f"{REEMBED_KNOWLEDGE_BASE}:{kb_id}",
                    )
                )
            else:
                changes["embedding_model"], changes["embedding_dimensions"] = new_model
                changes["pending_embedding_model"] = None
                changes["pending_embedding_dimensions"] = None
                changes["reindex_error"] = None
        elif new_model is not None and (kb.pending_embedding_model or kb.reindex_error):
            # Naming the model in use cancels a pending re-embedding and forgets a failed one:
            # every passage is still embedded with it.
            changes["pending_embedding_model"] = None
            changes["pending_embedding_dimensions"] = None
            changes["reindex_error"] = None
        if changes:
            await self._knowledge_bases.update(org_id, kb_id, changes)
        if "language" in changes:
            await self._chunks.reindex_text(org_id, kb_id)
        summary = await self._knowledge_bases.get_summary(org_id, kb_id)
        if summary is None:
            raise NotFound(KB_NOT_FOUND)
        await self._uow.commit()
        return summary

    def _source_changes(self, address: str | None, source: str | Unset | None) -> dict[str, Any]:
        if source is None:
            return {"source": None, "inbound_email_address": None}
        if source == EMAIL_SOURCE and address is None:
            return {"source": EMAIL_SOURCE, "inbound_email_address": self._inbound.new_address()}
        return {}
