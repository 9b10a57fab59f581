from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

from application.metering import MeteredCall, SpendMeter
from application.ports.chunk_repository import ChunkRepository, EmbeddedChunk
from application.ports.chunker import Chunker
from application.ports.embedder import EmbedderRegistry, EmbeddingFailed
from application.ports.embedding_parts import EmbeddedPart, EmbeddingParts, ModelChoice
from application.ports.file_repository import FileRepository
from application.ports.job_queue import JobQueue, embed_file_part_job
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.structured_extractor import StructuredExtractionFailed, StructuredExtractor
from application.ports.text_extractor import ExtractorCrashed, TextExtractor
from application.ports.unit_of_work import UnitOfWork
from domain.chunks import TextChunk
from domain.errors import NotFound
from domain.extraction import ExtractedDocument, ExtractionFailed, ExtractionLimits
from domain.files import KnowledgeBaseFile, ProcessingStatus, file_folder
from domain.knowledge_bases import KnowledgeBase
from domain.spend import SpendCapReached
from domain.usage import UsagePurpose

MISSING_OBJECT = "The uploaded file was not found in storage; upload it again."
TOO_MANY_RUNS = "Processing was interrupted too many times; the file may be too large or malformed."


def failure_of(reached: ProcessingStatus) -> ProcessingStatus:
    """The failure state of the stage a file had reached."""
    return (
        ProcessingStatus.PARSE_FAILED
        if reached is ProcessingStatus.PARSING
        else (ProcessingStatus.CHUNK_FAILED)
    )


def models_of(kb: KnowledgeBase) -> list[ModelChoice]:
    """The models a knowledge base's passages are stored with: its own, and while it is being
    re-embedded, the pending one."""
    models = [ModelChoice(model=kb.embedding_model, dimensions=kb.embedding_dimensions)]
    if kb.pending_embedding_model and kb.pending_embedding_dimensions:
        pending = ModelChoice(
            model=kb.pending_embedding_model, dimensions=kb.pending_embedding_dimensions
        )
        models.append(pending)
    return models


async def embed_with(
    embedders: EmbedderRegistry, models: Sequence[ModelChoice], passages: Sequence[TextChunk]
) -> list[EmbeddedPart]:
    """The passages embedded with each of `models`."""
    embedded: list[EmbeddedPart] = []
    for choice in models:
        texts = [p.text for p in passages]
        vectors = await embedders.get(choice.model, choice.dimensions).embed(texts)
        pairs = zip(passages, vectors, strict=True)
        chunks = [EmbeddedChunk(chunk=p, vector=v) for p, v in pairs]
        embedded.append(EmbeddedPart(model=choice, chunks=chunks))
    return embedded


async def store_passages(
    chunks: ChunkRepository, file: KnowledgeBaseFile, embedded: Sequence[EmbeddedPart]
) -> None:
    """Make each of `embedded` the file's passages for its model."""
    for part in embedded:
        await chunks.replace_for_file(
            file.org_id,
            knowledge_base_id=file.knowledge_base_id,
            file_record_id=file.id,
            embedding_model=part.model.model,
            dimensions=part.model.dimensions,
            chunks=part.chunks,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessFileCommand:
    org_id: str
    file_record_id: int
    last_attempt: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessingLimits:
    """How many runs a file (or one part of its passages) may take, a run cut short by a dying
    worker included; how many passages a file may have before they are embedded in parts of
    `embedding_part_size` by several jobs at once; and the extraction bounds."""

    max_runs: int = 5
    embedding_part_size: int = 64
    max_object_size: int = 100 * 1024 * 1024
    extraction: ExtractionLimits = field(default_factory=ExtractionLimits)


class ProcessFile:
    """Extract, chunk and embed one file: `parsing → parsed → chunking → completed`.

    Rules: a file that was deleted, or is already in a terminal state, is left alone. Every run
    starts from the stored original and replaces what an earlier run wrote (the extracted text,
    the page images, the passages, the count of pages read by OCR), so running twice leaves one
    set. A file that cannot be read ends in `parse_failed`, one whose passages cannot be
    embedded in `chunk_failed`, each with a message for its owner. When the knowledge base has
    an extraction schema and model, the text is extracted into `extractedData` after parsing;
    failing that ends in `extract_failed`. An unexpected error is raised for the queue to retry;
    on the last attempt the file ends in the failure state of the stage it reached instead. A
    file whose runs keep being cut short (its worker dies) fails after `max_runs`. While the
    knowledge base is being re-embedded, passages are embedded with the pending model too; the
    passages stored are those of the models the knowledge base has when they are stored (it is
    locked against changes while they are), so a re-embedding asked for mid-run is not missed. A
    file with more than `embedding_part_size` passages is staged in parts of that size (cut from
    its passages longest first, so that each embedding batch holds passages of about one
    length), one `EmbedFilePart` job each, so that several workers embed it at once; it stays in
    `chunking` until the last part is done. A new run drops whatever an earlier one staged.
    """

    def __init__(
        self,
        files: FileRepository,
        knowledge_bases: KnowledgeBaseRepository,
        chunks: ChunkRepository,
        storage: ObjectStorage,
        extractor: TextExtractor,
        chunker: Chunker,
        embedders: EmbedderRegistry,
        structured: StructuredExtractor,
        parts: EmbeddingParts,
        jobs: JobQueue,
        uow: UnitOfWork,
        limits: ProcessingLimits,
        meter: SpendMeter,
    ) -> None:
        self._meter = meter
        self._files = files
        self._kbs = knowledge_bases
        self._chunks = chunks
        self._storage = storage
        self._extractor = extractor
        self._chunker = chunker
        self._embedders = embedders
        self._structured = structured
        self._parts = parts
        self._jobs = jobs
        self._uow = uow
        self._limits = limits

    async def execute(self, command: ProcessFileCommand) -> ProcessingStatus | None:
        org_id, record_id = command.org_id, command.file_record_id
        file = await self._files.get_by_id(org_id, record_id)
        if file is None or file.processing_status.is_terminal:
            return None
        kb = await self._kbs.get(org_id, file.knowledge_base_id)
        if kb is None:
            return None
        runs = await self._files.begin_attempt(org_id, record_id)
        await self._parts.discard(org_id, record_id)
        await self._uow.commit()
        if runs > self._limits.max_runs:
            return await self._fail(file, failure_of(file.processing_status), TOO_MANY_RUNS)
        stage = ProcessingStatus.PARSE_FAILED
        try:
            document = await self._extract(file)
            if kb.extraction_schema and kb.extraction_model:
                stage = ProcessingStatus.EXTRACT_FAILED
                await self._extract_data(file, kb, document)
            stage = ProcessingStatus.CHUNK_FAILED
            return await self._chunk_and_embed(file, kb, document)
        except ExtractionFailed as failure:
            return await self._fail(file, ProcessingStatus.PARSE_FAILED, failure.message)
        except StructuredExtractionFailed as failure:
            return await self._fail(file, ProcessingStatus.EXTRACT_FAILED, failure.message)
        except EmbeddingFailed as failure:
            return await self._fail(file, ProcessingStatus.CHUNK_FAILED, failure.message)
        except SpendCapReached as refused:
            return await self._fail(file, stage, refused.explanation)
        except Exception as error:
            if not command.last_attempt:
                raise
            if isinstance(error, ExtractorCrashed):
                message = f"{error.message} It did on every attempt."
            else:
                message = f"Processing failed after several attempts ({type(error).__name__})."
            return await self._fail(file, stage, message)

    async def _extract(self, file: KnowledgeBaseFile) -> ExtractedDocument:
        try:
            data = await self._storage.get(file.file_key)
        except NotFound:
            raise ExtractionFailed(MISSING_OBJECT) from None
        if len(data) > self._limits.max_object_size:
            raise ExtractionFailed("The file is larger than the upload limit.")
        document = await asyncio.to_thread(
            self._extractor.extract,
            data,
            content_type=file.content_type,
            file_name=file.file_name,
            limits=self._limits.extraction,
        )
        await self._storage.put(
            file.content_key, document.markdown.encode(), content_type="text/markdown"
        )
        images_folder = f"{file_folder(file.org_id, file.file_id)}images/"
        await self._storage.delete_prefix(images_folder)
        keys: list[str] = []
        for image in document.images:
            key = f"{images_folder}{image.name}"
            await self._storage.put(key, image.data, content_type=image.content_type)
            keys.append(key)
        await self._files.set_image_keys(file.org_id, file.id, keys)
        await self._files.set_ocr_pages(file.org_id, file.id, document.ocr_pages)
        await self._files.set_status(file.org_id, file.id, ProcessingStatus.PARSED)
        await self._uow.commit()
        return document

    async def _extract_data(
        self, file: KnowledgeBaseFile, kb: KnowledgeBase, document: ExtractedDocument
    ) -> None:
        assert kb.extraction_schema is not None and kb.extraction_model is not None
        data = await self._structured.extract(
            model=kb.extraction_model,
            schema=kb.extraction_schema,
            text=document.markdown,
            file_name=file.file_name,
            meter=self._meter.scope(
                MeteredCall(
                    org_id=file.org_id,
                    user_id=None,
                    thread_id=None,
                    purpose=UsagePurpose.EXTRACTION,
                    model=kb.extraction_model,
                )
            ),
        )
        await self._files.set_extracted_data(file.org_id, file.id, data)
        await self._uow.commit()

    async def _chunk_and_embed(
        self, file: KnowledgeBaseFile, kb: KnowledgeBase, document: ExtractedDocument
    ) -> ProcessingStatus | None:
        await self._files.set_status(file.org_id, file.id, ProcessingStatus.CHUNKING)
        await self._uow.commit()
        chunks = await asyncio.to_thread(
            self._chunker.split, document, size=kb.chunk_size, overlap=kb.chunk_overlap
        )
        models = models_of(kb)
        size = max(1, self._limits.embedding_part_size)
        if len(chunks) > size:
            # Cut from the passages longest first, as one request's batches would be: each
            # batch then holds passages of about the same length and pads little.
            ordered = sorted(chunks, key=lambda chunk: -len(chunk.text))
            parts = [ordered[start : start + size] for start in range(0, len(ordered), size)]
            part_ids = await self._parts.stage(
                file.org_id, file_record_id=file.id, models=models, parts=parts
            )
            for part_id in part_ids:
                await self._jobs.enqueue(embed_file_part_job(file.org_id, file.id, part_id))
            await self._uow.commit()
            return ProcessingStatus.CHUNKING
        embedders = self._meter.embedders(self._embedders, file.org_id)
        embedded = await embed_with(embedders, models, chunks)
        current = await self._kbs.get(file.org_id, kb.id, for_share=True)
        if current is None:
            await self._uow.rollback()
            return None
        wanted = models_of(current)
        missing = [choice for choice in wanted if choice not in models]
        embedded += await embed_with(embedders, missing, chunks)
        await store_passages(self._chunks, file, [p for p in embedded if p.model in wanted])
        await self._files.set_status(file.org_id, file.id, ProcessingStatus.COMPLETED)
        await self._uow.commit()
        return ProcessingStatus.COMPLETED

    async def _fail(
        self, file: KnowledgeBaseFile, status: ProcessingStatus, message: str
    ) -> ProcessingStatus:
        await self._uow.rollback()
        await self._files.set_status(file.org_id, file.id, status, message)
        await self._uow.commit()
        return status
