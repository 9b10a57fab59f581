"""Knowledge bases, files and uploads, processing and search: repositories on the request's
connection, the extraction sandbox and chunker for the app's life, and the use cases."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import structlog
from dishka import Provider, Scope, provide, provide_all

from adapters.chunking.llama_index_chunker import LlamaIndexChunker
from adapters.extraction.sandbox import SandboxedTextExtractor
from adapters.postgres.chunks import PgChunkRepository
from adapters.postgres.database import OrgConnection
from adapters.postgres.embedding_parts import PgEmbeddingParts
from adapters.postgres.files import PgFileRepository
from adapters.postgres.hybrid_search import SearchTuning
from adapters.postgres.issued_uploads import PgIssuedUploadRepository
from adapters.postgres.knowledge_bases import PgKnowledgeBaseRepository
from adapters.postgres.text_search import Bm25
from adapters.queue.pgqueuer_queue import PgQueuerJobQueue
from adapters.rerank import make_reranker
from application.ports.chunk_repository import ChunkRepository
from application.ports.chunker import Chunker
from application.ports.embedding_parts import EmbeddingParts
from application.ports.file_repository import FileRepository
from application.ports.issued_uploads import IssuedUploadRepository
from application.ports.job_queue import JobQueue
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.object_storage import ObjectStorage
from application.ports.text_extractor import TextExtractor
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.admit_upload import AdmitUpload
from application.use_cases.associate_file import AssociateFile
from application.use_cases.create_knowledge_base import CreateKnowledgeBase
from application.use_cases.create_upload import CreateUpload
from application.use_cases.delete_file import DeleteFile
from application.use_cases.delete_knowledge_base import DeleteKnowledgeBase
from application.use_cases.download_file import DownloadFile
from application.use_cases.embed_file_part import EmbedFilePart
from application.use_cases.list_files import ListFiles
from application.use_cases.list_knowledge_bases import ListKnowledgeBases
from application.use_cases.process_file import ProcessFile, ProcessingLimits
from application.use_cases.purge_deleted_upload import PurgeDeletedUpload
from application.use_cases.reembed_knowledge_base import ReembedKnowledgeBase
from application.use_cases.reprocess_file import ReprocessFile
from application.use_cases.search_knowledge_base import Reranking, SearchKnowledgeBase
from application.use_cases.update_knowledge_base import UpdateKnowledgeBase
from domain.extraction import ExtractionLimits
from domain.inbound_email import InboundEmailDomain
from domain.uploads import UploadPolicy
from entrypoints.config import Settings


class KnowledgeProvider(Provider):
    """Everything behind `/knowledge-bases`, `/files`, `/uploads`, search and the processing
    jobs."""

    scope = Scope.REQUEST

    knowledge_bases = provide(PgKnowledgeBaseRepository, provides=KnowledgeBaseRepository)
    files = provide(PgFileRepository, provides=FileRepository)
    uploads = provide(PgIssuedUploadRepository, provides=IssuedUploadRepository)
    embedding_parts = provide(PgEmbeddingParts, provides=EmbeddingParts)
    jobs = provide(PgQueuerJobQueue, provides=JobQueue)
    chunker = provide(LlamaIndexChunker, provides=Chunker, scope=Scope.APP)

    use_cases = provide_all(
        ListKnowledgeBases,
        UpdateKnowledgeBase,
        DeleteKnowledgeBase,
        ListFiles,
        DeleteFile,
        CreateUpload,
        AdmitUpload,
        PurgeDeletedUpload,
        DownloadFile,
        ProcessFile,
        EmbedFilePart,
        ReembedKnowledgeBase,
        SearchKnowledgeBase,
        ReprocessFile,
    )

    @provide
    def chunks(self, db: OrgConnection, tuning: SearchTuning) -> ChunkRepository:
        repository = PgChunkRepository(db)
        repository.tuning = tuning
        return repository

    @provide(scope=Scope.APP)
    def search_tuning(self, settings: Settings) -> SearchTuning:
        search = settings.search
        return SearchTuning(
            vector_weight=search.vector_weight,
            text_weight=search.text_weight,
            rrf_k=search.rrf_k,
            bm25=Bm25(k1=search.bm25_k1, b=search.bm25_b),
            feedback=search.feedback,
            diversify=search.diversify,
        )

    @provide(scope=Scope.APP)
    async def reranking(self, settings: Settings) -> AsyncIterator[Reranking]:
        search = settings.search
        if search.rerank_model is None:
            yield Reranking()
            return
        reranker = make_reranker(
            search.rerank_model,
            api_key=search.rerank_api_key,
            name=search.rerank_name,
            timeout=search.rerank_timeout,
            batch_size=search.rerank_batch_size,
            torch_threads=settings.torch_threads,
        )
        yield Reranking(reranker, search.rerank_candidates)
        await reranker.aclose()

    @provide(scope=Scope.APP)
    def upload_policy(self, settings: Settings) -> UploadPolicy:
        return UploadPolicy(max_size=settings.max_upload_size, url_ttl=settings.upload_url_ttl)

    @provide(scope=Scope.APP)
    def processing_limits(self, settings: Settings) -> ProcessingLimits:
        return ProcessingLimits(
            max_object_size=settings.max_upload_size,
            embedding_part_size=settings.embedding_part_size,
            extraction=ExtractionLimits(
                max_pages=settings.extract_max_pages,
                max_ocr_pages=settings.ocr_max_pages,
                # Below the sandbox's own bound, which fails the whole file.
                max_ocr_seconds=min(settings.ocr_max_seconds, settings.extract_timeout / 2),
            ),
        )

    @provide(scope=Scope.APP)
    def extractor(self, settings: Settings) -> Iterator[TextExtractor]:
        extractor = SandboxedTextExtractor(
            memory_limit=settings.worker_memory_mb * 2**20,
            timeout=float(settings.extract_timeout),
            on_event=structlog.get_logger("agent_platform.extraction").warning,
        )
        yield extractor
        extractor.close()

    @provide
    def create_knowledge_base(
        self,
        repo: KnowledgeBaseRepository,
        uow: UnitOfWork,
        settings: Settings,
        inbound: InboundEmailDomain,
    ) -> CreateKnowledgeBase:
        return CreateKnowledgeBase(repo, uow, settings.default_embedding_model, inbound)

    @provide
    def associate_file(
        self,
        kbs: KnowledgeBaseRepository,
        files: FileRepository,
        uploads: IssuedUploadRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        storage: ObjectStorage,
        settings: Settings,
    ) -> AssociateFile:
        return AssociateFile(kbs, files, uploads, jobs, uow, storage, settings.max_upload_size)
