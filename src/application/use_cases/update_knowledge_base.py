from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from application.ports.job_queue import REEMBED_KNOWLEDGE_BASE, Job, JobQueue
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.chunks import validate_chunking
from domain.errors import NotFound
from domain.identity import Caller
from domain.ids import parse_positive_id
from domain.inbound_email import (
    EMAIL_SOURCE,
    NO_INBOUND_EMAIL,
    InboundEmailDomain,
    validate_source,
)
from domain.knowledge_bases import (
    KB_ID_REQUIRED,
    KB_NOT_FOUND,
    KnowledgeBaseSummary,
    validate_description,
    validate_extraction_model,
    validate_extraction_schema,
    validate_name,
)
from domain.models import resolve_embedding_model
from domain.values import UNSET, Unset


@dataclass(frozen=True, slots=True, kw_only=True)
class UpdateKnowledgeBaseCommand:
    caller: Caller
    kb_id: object
    name: object | Unset = UNSET
    description: object | Unset = UNSET
    embedding_model: object | Unset = UNSET
    embedding_dimensions: object | Unset = UNSET
    extraction_model: object | Unset = UNSET
    extraction_schema: object | Unset = UNSET
    chunk_size: object | Unset = UNSET
    chunk_overlap: object | Unset = UNSET
    source: object | Unset = UNSET


class UpdateKnowledgeBase:
    """Change the fields the caller sent; fields not sent stay as they are.

    Rules: the same validation as creation; `null` clears the extraction model or schema. New
    chunking settings apply to files processed from then on (reprocess a file to re-split it).
    Changing the embedding model of a knowledge base without files takes effect at once. With
    files, the new model is recorded as pending and a re-embedding job is queued: search keeps
    answering from the current index and the status is `reindexing` until the job swaps it in.
    `source: "email"` gives the knowledge base an address (one it has already is kept; 400
    when AP_INBOUND_EMAIL_DOMAIN is unset), `source: null` removes it: mail to the old address
    then finds no knowledge base.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        inbound: InboundEmailDomain = NO_INBOUND_EMAIL,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._jobs = jobs
        self._uow = uow
        self._inbound = inbound

    async def execute(self, command: UpdateKnowledgeBaseCommand) -> KnowledgeBaseSummary:
        kb_id = parse_positive_id(command.kb_id, KB_ID_REQUIRED)
        org_id = command.caller.org_id
        changes: dict[str, Any] = {}
        if not isinstance(command.name, Unset):
            changes["name"] = validate_name(command.name)
        if not isinstance(command.description, Unset):
            changes["description"] = validate_description(command.description)
        if not isinstance(command.extraction_model, Unset):
            changes["extraction_model"] = validate_extraction_model(command.extraction_model)
        if not isinstance(command.extraction_schema, Unset):
            changes["extraction_schema"] = validate_extraction_schema(command.extraction_schema)
        source: str | Unset | None = UNSET
        if not isinstance(command.source, Unset):
            source = validate_source(command.source)
        new_model: tuple[str, int] | None = None
        if not isinstance(command.embedding_model, Unset):
            dims = (
                None
                if isinstance(command.embedding_dimensions, Unset)
                else (command.embedding_dimensions)
            )
            new_model = resolve_embedding_model(command.embedding_model, dims)

        kb = await self._knowledge_bases.get(org_id, kb_id, for_update=True)
        if kb is None:
            raise NotFound(KB_NOT_FOUND)
        changes.update(self._source_changes(kb.inbound_email_address, source))
        if not isinstance(command.chunk_size, Unset) or not isinstance(
            command.chunk_overlap, Unset
        ):
            size = kb.chunk_size if isinstance(command.chunk_size, Unset) else command.chunk_size
            overlap = (
                kb.chunk_overlap
                if isinstance(command.chunk_overlap, Unset)
                else command.chunk_overlap
            )
            changes["chunk_size"], changes["chunk_overlap"] = validate_chunking(size, overlap)
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
