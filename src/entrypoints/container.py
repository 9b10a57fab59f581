"""The dishka container: one set of providers behind the HTTP app, the CLI and the worker.

Long-lived clients live at APP scope; the organization-scoped connection, the repositories
and the use cases at REQUEST scope. Tests and other entrypoints pass extra providers to override
any of them.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import asyncpg
import httpx
import structlog
from dishka import (
    AsyncContainer,
    Provider,
    Scope,
    from_context,
    make_async_container,
    provide,
    provide_all,
)

from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.chat.registry import DefaultChatModelRegistry
from adapters.chunking.llama_index_chunker import LlamaIndexChunker
from adapters.clock import SystemClock
from adapters.embeddings.registry import DefaultEmbedderRegistry
from adapters.identity.dev_provider import DEV_ISSUER, DevIdentityProvider
from adapters.identity.jwks import JwksTokenVerifier, http_jwks_fetcher, static_jwks_fetcher
from adapters.llm.supervisor import RunnerSettings
from adapters.postgres.chunks import PgChunkRepository
from adapters.postgres.database import FairGate, OrgConnection, create_pool, org_connection
from adapters.postgres.embedding_parts import PgEmbeddingParts
from adapters.postgres.repositories import (
    PgFileRepository,
    PgKnowledgeBaseRepository,
    PgMemberDirectory,
)
from adapters.queue.pgqueuer_queue import PgQueuerJobQueue
from adapters.sandboxed_extraction import SandboxedTextExtractor
from adapters.storage.local_disk import LocalDiskStorage, load_or_create_secret
from adapters.storage.s3 import S3ObjectStorage, s3_client
from adapters.structured.chat_extractor import ChatStructuredExtractor
from application.ports.chat_model import ChatModelRegistry
from application.ports.chunk_repository import ChunkRepository
from application.ports.chunker import Chunker
from application.ports.clock import Clock
from application.ports.embedder import EmbedderRegistry
from application.ports.embedding_parts import EmbeddingParts
from application.ports.file_repository import FileRepository
from application.ports.job_queue import JobQueue
from application.ports.knowledge_base_repository import KnowledgeBaseRepository
from application.ports.member_directory import MemberDirectory
from application.ports.object_storage import ObjectStorage
from application.ports.structured_extractor import StructuredExtractor
from application.ports.text_extractor import TextExtractor
from application.ports.token_verifier import TokenVerifier
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.associate_file import AssociateFile
from application.use_cases.create_knowledge_base import CreateKnowledgeBase
from application.use_cases.create_upload import CreateUpload
from application.use_cases.delete_file import DeleteFile
from application.use_cases.delete_knowledge_base import DeleteKnowledgeBase
from application.use_cases.embed_file_part import EmbedFilePart
from application.use_cases.list_files import ListFiles
from application.use_cases.list_knowledge_bases import ListKnowledgeBases
from application.use_cases.process_file import ProcessFile, ProcessingLimits
from application.use_cases.record_member_seen import RecordMemberSeen
from application.use_cases.reembed_knowledge_base import ReembedKnowledgeBase
from application.use_cases.reprocess_file import ReprocessFile
from application.use_cases.search_knowledge_base import SearchKnowledgeBase
from application.use_cases.update_knowledge_base import UpdateKnowledgeBase
from domain.extraction import ExtractionLimits
from domain.identity import Caller, Identity
from domain.uploads import UploadPolicy
from entrypoints.agent_providers import AgentProvider
from entrypoints.config import Settings
from entrypoints.conversation_providers import ConversationProvider
from entrypoints.database import Database

MEMBER_RECORD_TTL = 300.0


class RecentlySeen:
    """Which identities were provisioned lately, so that a steady stream of requests by the
    same member does not write its record on every request."""

    def __init__(self, ttl: float = MEMBER_RECORD_TTL, limit: int = 10_000) -> None:
        self._ttl = ttl
        self._limit = limit
        self._seen: dict[Identity, float] = {}

    def is_fresh(self, identity: Identity) -> bool:
        seen_at = self._seen.get(identity)
        return seen_at is not None and time.monotonic() - seen_at < self._ttl

    def forget_all(self) -> None:
        self._seen.clear()

    async def provision(self, identity: Identity, record: Callable[[], Awaitable[None]]) -> None:
        """Run `record` (the member's provisioning) unless the identity was seen lately."""
        if not self.is_fresh(identity):
            await record()
            self.mark(identity)

    def mark(self, identity: Identity) -> None:
        if len(self._seen) >= self._limit:
            self._seen.clear()
        self._seen[identity] = time.monotonic()


class InfrastructureProvider(Provider):
    """Long-lived clients: database pool, HTTP client, identity, storage, clock."""

    scope = Scope.APP
    settings = from_context(Settings)
    database = from_context(Database)

    @provide
    async def pool(self, settings: Settings, database: Database) -> AsyncIterator[asyncpg.Pool]:
        pool = await create_pool(
            database.url, app_role=settings.database_app_role, size=settings.database_pool_size
        )
        yield pool
        await pool.close()

    @provide
    def gate(self, settings: Settings) -> FairGate:
        return FairGate(settings.database_pool_size)

    @provide
    async def http_client(self) -> AsyncIterator[httpx.AsyncClient]:
        async with httpx.AsyncClient(follow_redirects=False) as client:
            yield client

    @provide
    def dev_identity(self, settings: Settings) -> DevIdentityProvider | None:
        if not settings.dev_identity:
            return None
        return dev_identity_provider(settings)

    @provide
    def token_verifier(
        self,
        settings: Settings,
        client: httpx.AsyncClient,
        dev: DevIdentityProvider | None,
    ) -> TokenVerifier:
        if dev is not None:
            fetch = static_jwks_fetcher(dev.jwks())
            issuer = dev.issuer
        else:
            assert settings.auth_jwks_url and settings.auth_issuer
            fetch = http_jwks_fetcher(settings.auth_jwks_url, client)
            issuer = settings.auth_issuer
        return JwksTokenVerifier(
            fetch,
            issuer=issuer,
            audience=settings.auth_audience,
            authorized_parties=settings.auth_authorized_parties,
            leeway=settings.auth_leeway,
        )

    @provide
    def local_storage(self, settings: Settings) -> LocalDiskStorage:
        return local_disk_storage(settings)

    @provide
    async def storage(self, settings: Settings) -> AsyncIterator[ObjectStorage]:
        if settings.storage != "s3":
            yield local_disk_storage(settings)
            return
        assert settings.s3_bucket
        async with s3_client(
            endpoint_url=settings.s3_endpoint_url,
            region=settings.s3_region,
            path_style=settings.s3_path_style,
        ) as client:
            yield S3ObjectStorage(client, settings.s3_bucket, settings.s3_prefix)

    @provide
    def clock(self) -> Clock:
        return SystemClock()

    @provide
    def upload_policy(self, settings: Settings) -> UploadPolicy:
        return UploadPolicy(max_size=settings.max_upload_size, url_ttl=settings.upload_url_ttl)

    @provide
    def recently_seen(self) -> RecentlySeen:
        return RecentlySeen()

    @provide
    def extractor(self, settings: Settings) -> Iterator[TextExtractor]:
        extractor = SandboxedTextExtractor(
            memory_limit=settings.worker_memory_mb * 2**20,
            timeout=float(settings.extract_timeout),
            on_event=structlog.get_logger("agent_platform.extraction").warning,
        )
        yield extractor
        extractor.close()

    @provide
    def chunker(self) -> Chunker:
        return LlamaIndexChunker()

    @provide
    def embedders(self, settings: Settings, client: httpx.AsyncClient) -> EmbedderRegistry:
        return DefaultEmbedderRegistry(
            http_client=client,
            openai_base_url=settings.openai_base_url,
            openai_api_key=settings.openai_api_key,
            torch_threads=settings.torch_threads,
        )

    @provide
    async def local_chat_model(self, settings: Settings) -> AsyncIterator[LlamaCppChatModel]:
        model = LlamaCppChatModel(
            RunnerSettings(
                threads=settings.local_llm_threads,
                memory_limit=settings.local_model_memory_mb * 1024 * 1024,
                stall_timeout=float(settings.local_model_stall_timeout),
            )
        )
        yield model
        await model.aclose()

    @provide
    def structured_extractor(
        self, settings: Settings, client: httpx.AsyncClient, local: LlamaCppChatModel
    ) -> StructuredExtractor:
        return ChatStructuredExtractor(
            http_client=client,
            openai_base_url=settings.openai_base_url,
            openai_api_key=settings.openai_api_key,
            local_model=local,
        )

    @provide
    def chat_models(
        self, settings: Settings, client: httpx.AsyncClient, local: LlamaCppChatModel
    ) -> ChatModelRegistry:
        return DefaultChatModelRegistry(
            http_client=client,
            openai_base_url=settings.openai_base_url,
            openai_api_key=settings.openai_api_key,
            timeout=settings.chat_timeout,
            local_model=local,
        )

    @provide
    def processing_limits(self, settings: Settings) -> ProcessingLimits:
        return ProcessingLimits(
            max_object_size=settings.max_upload_size,
            embedding_part_size=settings.embedding_part_size,
            extraction=ExtractionLimits(max_pages=settings.extract_max_pages),
        )


class RequestProvider(Provider):
    """The organization-scoped connection and everything built on it, once per request."""

    scope = Scope.REQUEST

    @provide
    async def connection(
        self, pool: asyncpg.Pool, gate: FairGate, identity: Identity
    ) -> AsyncIterator[OrgConnection]:
        async with org_connection(pool, identity.org_id, gate) as connection:
            yield connection

    @provide
    def unit_of_work(self, db: OrgConnection) -> UnitOfWork:
        return db

    @provide
    def knowledge_bases(self, db: OrgConnection) -> KnowledgeBaseRepository:
        return PgKnowledgeBaseRepository(db)

    @provide
    def files(self, db: OrgConnection) -> FileRepository:
        return PgFileRepository(db)

    @provide
    def members(self, db: OrgConnection) -> MemberDirectory:
        return PgMemberDirectory(db)

    @provide
    def jobs(self, db: OrgConnection) -> JobQueue:
        return PgQueuerJobQueue(db)

    @provide
    def chunks(self, db: OrgConnection) -> ChunkRepository:
        return PgChunkRepository(db)

    @provide
    def embedding_parts(self, db: OrgConnection) -> EmbeddingParts:
        return PgEmbeddingParts(db)

    @provide
    async def caller(
        self, identity: Identity, seen: RecentlySeen, container: AsyncContainer
    ) -> Caller:
        caller = identity.as_caller()

        async def record() -> None:
            # Resolved only when needed: most requests come from a member seen moments ago.
            await (await container.get(RecordMemberSeen)).execute(identity)

        await seen.provision(identity, record)
        return caller

    @provide
    def create_knowledge_base(
        self, repo: KnowledgeBaseRepository, uow: UnitOfWork, settings: Settings
    ) -> CreateKnowledgeBase:
        return CreateKnowledgeBase(repo, uow, settings.default_embedding_model)

    @provide
    def associate_file(
        self,
        kbs: KnowledgeBaseRepository,
        files: FileRepository,
        jobs: JobQueue,
        uow: UnitOfWork,
        settings: Settings,
    ) -> AssociateFile:
        return AssociateFile(kbs, files, jobs, uow, settings.max_upload_size)

    use_cases = provide_all(
        ListKnowledgeBases,
        UpdateKnowledgeBase,
        DeleteKnowledgeBase,
        ListFiles,
        DeleteFile,
        CreateUpload,
        RecordMemberSeen,
        ProcessFile,
        EmbedFilePart,
        ReembedKnowledgeBase,
        SearchKnowledgeBase,
        ReprocessFile,
    )


def local_disk_storage(settings: Settings) -> LocalDiskStorage:
    data_dir = settings.data_dir.resolve()
    return LocalDiskStorage(
        data_dir / "objects",
        settings.effective_public_url,
        load_or_create_secret(data_dir / "storage-signing.key"),
    )


def dev_identity_provider(settings: Settings) -> DevIdentityProvider:
    return DevIdentityProvider(
        settings.data_dir.resolve() / "dev-idp" / "signing-key.pem",
        issuer=settings.auth_issuer or DEV_ISSUER,
    )


def make_container(settings: Settings, database: Database, *providers: Provider) -> AsyncContainer:
    return make_async_container(
        InfrastructureProvider(),
        RequestProvider(),
        AgentProvider(),
        ConversationProvider(),
        *providers,
        context={Settings: settings, Database: database},
    )
