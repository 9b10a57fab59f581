from __future__ import annotations

from dataclasses import dataclass

from application.metering import SpendMeter
from application.ports.chunk_repository import ChunkRepository
from application.ports.embedder import EmbedderRegistry, EmbeddingFailed
from application.ports.embedding_parts import EmbeddedPart, EmbeddingParts, StagedPart
from application.ports.file_repository import FileRepository
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.process_file import (
    TOO_MANY_RUNS,
    ProcessingLimits,
    embed_with,
    models_of,
    store_passages,
)
from domain.files import ProcessingStatus
from domain.spend import SpendCapReached


@dataclass(frozen=True, slots=True, kw_only=True)
class EmbedFilePartCommand:
    org_id: str
    file_record_id: int
    part_id: int
    last_attempt: bool = False


class EmbedFilePart:
    """Embed one staged part of a large file's passages; the part done last publishes them all.

    Rules: a part that is gone (its file was reprocessed, deleted, failed or completed) is
    dropped, and so is one whose file is no longer in `chunking`. The part's vectors are
    stored beside the searchable passages, not among them. Parts finish one at a time (the
    file is locked); the one that finds no other part left, with the knowledge base locked
    against changes, makes the staged vectors the file's passages for the models the knowledge
    base has at that moment (a model asked for since the file was staged is embedded there
    and then; one dropped since is left out) and moves the file to `completed`: search sees
    the whole file or none of it. A part that cannot be embedded ends the file in
    `chunk_failed` with the embedder's message and drops what it staged. An unexpected error
    is raised for the queue to retry; on the last attempt it ends the file the same way. A
    part whose runs keep being cut short fails the file after `max_runs` starts.
    """

    def __init__(
        self,
        files: FileRepository,
        knowledge_bases: KnowledgeBaseRepository,
        chunks: ChunkRepository,
        parts: EmbeddingParts,
        embedders: EmbedderRegistry,
        uow: UnitOfWork,
        limits: ProcessingLimits,
        meter: SpendMeter,
    ) -> None:
        self._meter = meter
        self._files = files
        self._kbs = knowledge_bases
        self._chunks = chunks
        self._parts = parts
        self._embedders = embedders
        self._uow = uow
        self._limits = limits

    async def execute(self, command: EmbedFilePartCommand) -> ProcessingStatus | None:
        """The file's new state when this part ended it (`completed` or `chunk_failed`), else
        None."""
        org_id = command.org_id
        staged = await self._parts.begin(org_id, command.part_id)
        await self._uow.commit()
        if staged is None or staged.file_record_id != command.file_record_id or staged.done:
            return None
        if staged.starts > self._limits.max_runs:
            return await self._fail(command, TOO_MANY_RUNS)
        try:
            embedders = self._meter.embedders(self._embedders, org_id)
            embedded = await embed_with(embedders, staged.models, staged.passages)
            return await self._finish(command, staged, embedded)
        except EmbeddingFailed as failure:
            return await self._fail(command, failure.message)
        except SpendCapReached as refused:
            return await self._fail(command, refused.explanation)
        except Exception as error:
            if not command.last_attempt:
                raise
            message = f"Processing failed after several attempts ({type(error).__name__})."
            return await self._fail(command, message)

    async def _finish(
        self, command: EmbedFilePartCommand, staged: StagedPart, embedded: list[EmbeddedPart]
    ) -> ProcessingStatus | None:
        org_id, record_id = command.org_id, command.file_record_id
        file = await self._files.get_by_id(org_id, record_id)
        if file is None:
            return None
        # The knowledge base before the file: the order in which deleting it locks them.
        kb = await self._kbs.get(org_id, file.knowledge_base_id, for_share=True)
        if kb is None or not await self._files.lock_if_chunking(org_id, record_id):
            await self._uow.rollback()
            return None
        remaining = await self._parts.save(org_id, command.part_id, embedded)
        if remaining is None or remaining > 0:
            await self._uow.commit()
            return None
        wanted = models_of(kb)
        missing = [choice for choice in wanted if choice not in staged.models]
        if missing:
            passages = await self._parts.passages(org_id, record_id)
            embedders = self._meter.embedders(self._embedders, org_id)
            await store_passages(self._chunks, file, await embed_with(embedders, missing, passages))
        await self._parts.publish(
            org_id,
            knowledge_base_id=kb.id,
            file_record_id=record_id,
            models=[choice for choice in staged.models if choice in wanted],
        )
        await self._files.set_status(org_id, record_id, ProcessingStatus.COMPLETED)
        await self._uow.commit()
        return ProcessingStatus.COMPLETED

    async def _fail(self, command: EmbedFilePartCommand, message: str) -> ProcessingStatus | None:
        await self._uow.rollback()
        org_id, record_id = command.org_id, command.file_record_id
        if not await self._files.lock_if_chunking(org_id, record_id) or not (
            await self._parts.discard(org_id, record_id, if_staged=command.part_id)
        ):
            await self._uow.rollback()
            return None
        status = ProcessingStatus.CHUNK_FAILED
        await self._files.set_status(org_id, record_id, status, message)
        await self._uow.commit()
        return status
