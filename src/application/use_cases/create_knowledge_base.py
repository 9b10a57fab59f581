from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from domain.chunks import DEFAULT_CHUNK_OVERLAP, DEFAULT_CHUNK_SIZE, validate_chunking
from domain.identity import Caller
from domain.inbound_email import (
    EMAIL_SOURCE,
    NO_INBOUND_EMAIL,
    InboundEmailDomain,
    validate_source,
)
from domain.knowledge_bases import (
    KnowledgeBaseSummary,
    NewKnowledgeBase,
    validate_description,
    validate_extraction_model,
    validate_extraction_schema,
    validate_name,
)
from domain.models import DEFAULT_EMBEDDING_MODEL, resolve_embedding_model


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateKnowledgeBaseCommand:
    caller: Caller
    name: object
    description: object = None
    embedding_model: object = None
    embedding_dimensions: object = None
    extraction_model: object = None
    extraction_schema: object = None
    chunk_size: object = None
    chunk_overlap: object = None
    source: object = None


class CreateKnowledgeBase:
    """Create a knowledge base in the caller's organization.

    Rules: the name is required (1 to 200 characters, trimmed); the embedding model defaults to
    the deployment's default and must name a known provider; its dimension count is filled in
    for known models and must match them; an unlisted OpenAI-compatible model needs its
    dimension count; the extraction model and schema are optional; chunk size (32 to 8192
    tokens, default 256) and overlap (under half the size, default 32) shape how its files are
    split. `source` is `"email"` or null: `"email"` gives the knowledge base an address of its
    own (`kb-<random>@<AP_INBOUND_EMAIL_DOMAIN>`; 400 naming the setting when it is unset), any
    other value is 400. The creator is recorded.
    """

    def __init__(
        self,
        knowledge_bases: KnowledgeBaseRepository,
        uow: UnitOfWork,
        default_embedding_model: str = DEFAULT_EMBEDDING_MODEL,
        inbound: InboundEmailDomain = NO_INBOUND_EMAIL,
    ) -> None:
        self._knowledge_bases = knowledge_bases
        self._uow = uow
        self._default_embedding_model = default_embedding_model
        self._inbound = inbound

    async def execute(self, command: CreateKnowledgeBaseCommand) -> KnowledgeBaseSummary:
        name = validate_name(command.name)
        description = validate_description(command.description)
        model, dimensions = resolve_embedding_model(
            command.embedding_model
            if command.embedding_model is not None
            else self._default_embedding_model,
            command.embedding_dimensions,
        )
        schema: dict[str, Any] | None = validate_extraction_schema(command.extraction_schema)
        chunk_size, chunk_overlap = validate_chunking(
            DEFAULT_CHUNK_SIZE if command.chunk_size is None else command.chunk_size,
            DEFAULT_CHUNK_OVERLAP if command.chunk_overlap is None else command.chunk_overlap,
        )
        source = validate_source(command.source)
        address = self._inbound.new_address() if source == EMAIL_SOURCE else None
        kb = await self._knowledge_bases.add(
            NewKnowledgeBase(
                org_id=command.caller.org_id,
                user_id=command.caller.user_id,
                name=name,
                description=description,
                embedding_model=model,
                embedding_dimensions=dimensions,
                extraction_model=validate_extraction_model(command.extraction_model),
                extraction_schema=schema,
                chunk_size=chunk_size,
                chunk_overlap=chunk_overlap,
                source=source,
                inbound_email_address=address,
            )
        )
        await self._uow.commit()
        return KnowledgeBaseSummary.of(
            kb,
            file_count=0,
            total_size=0,
            last_file_uploaded_at=None,
            files_in_progress=0,
        )
