"""Hand-written fakes of the application ports, for unit tests of the use cases."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from application.ports.job_queue import Job
from application.ports.object_storage import SignedUpload
from domain.errors import Conflict, NotFound
from domain.files import KnowledgeBaseFile, NewFile, ProcessingStatus
from domain.identity import Identity
from domain.knowledge_bases import KnowledgeBase, KnowledgeBaseSummary, NewKnowledgeBase


class FakeClock:
    def __init__(self, now: datetime | None = None) -> None:
        self.current = now or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


class FakeUnitOfWork:
    """Records commits; a rollback restores the fakes' state as of the last commit."""

    def __init__(self, *stores: Any) -> None:
        self.commits = 0
        self.rollbacks = 0
        self._stores = stores
        self._checkpoint()

    def _checkpoint(self) -> None:
        self._saved = [store.snapshot() for store in self._stores]

    async def commit(self) -> None:
        self.commits += 1
        self._checkpoint()

    async def rollback(self) -> None:
        self.rollbacks += 1
        for store, saved in zip(self._stores, self._saved, strict=True):
            store.restore(saved)


class FakeKnowledgeBases:
    def __init__(self, files: FakeFiles | None = None) -> None:
        self.rows: dict[int, KnowledgeBase] = {}
        self.files = files
        self._next = 1

    def snapshot(self) -> Any:
        return dict(self.rows), self._next

    def restore(self, saved: Any) -> None:
        self.rows, self._next = dict(saved[0]), saved[1]

    async def add(self, new: NewKnowledgeBase) -> KnowledgeBase:
        now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self._next)
        kb = KnowledgeBase(
            id=self._next,
            source=None,
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
        return KnowledgeBaseSummary(
            knowledge_base=kb,
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


class FakeFiles:
    def __init__(self) -> None:
        self.rows: dict[int, KnowledgeBaseFile] = {}
        self._next = 1

    def snapshot(self) -> Any:
        return dict(self.rows), self._next

    def restore(self, saved: Any) -> None:
        self.rows, self._next = dict(saved[0]), saved[1]

    async def add(self, new: NewFile) -> KnowledgeBaseFile:
        if any(f.org_id == new.org_id and f.file_id == new.file_id for f in self.rows.values()):
            raise Conflict("This file is already associated with a knowledge base")
        now = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=self._next)
        record = KnowledgeBaseFile(
            id=self._next,
            processing_status=ProcessingStatus.PARSING,
            processing_error=None,
            image_keys=None,
            extracted_data=None,
            created_at=now,
            updated_at=now,
            **{f.name: getattr(new, f.name) for f in dataclasses.fields(new)},
        )
        self.rows[record.id] = record
        self._next += 1
        return record

    async def list_for_knowledge_base(self, org_id: str, kb_id: int) -> list[KnowledgeBaseFile]:
        rows = [
            f for f in self.rows.values() if f.org_id == org_id and f.knowledge_base_id == kb_id
        ]
        return sorted(rows, key=lambda f: f.id, reverse=True)

    async def get(self, org_id: str, kb_id: int, file_id: str) -> KnowledgeBaseFile | None:
        return next(
            (f for f in await self.list_for_knowledge_base(org_id, kb_id) if f.file_id == file_id),
            None,
        )

    async def delete(self, org_id: str, record_id: int) -> None:
        if record_id in self.rows and self.rows[record_id].org_id == org_id:
            del self.rows[record_id]


class FakeJobQueue:
    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def snapshot(self) -> Any:
        return list(self.jobs)

    def restore(self, saved: Any) -> None:
        self.jobs = list(saved)

    async def enqueue(self, job: Job) -> None:
        if job.dedupe_key and any(j.dedupe_key == job.dedupe_key for j in self.jobs):
            return
        self.jobs.append(job)


class FakeStorage:
    def __init__(self, failing_prefixes: set[str] | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        self.failing_prefixes = failing_prefixes or set()

    async def sign_upload(
        self, key: str, *, content_type: str, max_size: int, expires_at: datetime
    ) -> SignedUpload:
        return SignedUpload(
            url=f"https://storage.test/{key}?max={max_size}",
            method="PUT",
            headers={"Content-Type": content_type},
            expires_at=expires_at,
        )

    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        self.objects[key] = data

    async def get(self, key: str) -> bytes:
        if key not in self.objects:
            raise NotFound("Stored object not found")
        return self.objects[key]

    async def exists(self, key: str) -> bool:
        return key in self.objects

    async def delete_prefix(self, prefix: str) -> int:
        if prefix in self.failing_prefixes:
            raise OSError("storage unavailable")
        doomed = [k for k in self.objects if k.startswith(prefix)]
        for key in doomed:
            del self.objects[key]
        return len(doomed)


class FakeMemberDirectory:
    def __init__(self) -> None:
        self.seen: list[tuple[Identity, datetime]] = []

    def snapshot(self) -> Any:
        return list(self.seen)

    def restore(self, saved: Any) -> None:
        self.seen = list(saved)

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        self.seen.append((identity, seen_at))


class HashingEmbedder:
    """A deterministic embedder for fast tests: a normalised bag of hashed words, so texts
    sharing words are close. Can be told to fail."""

    def __init__(self, dimensions: int = 384, failure: Exception | None = None) -> None:
        self._dimensions = dimensions
        self.failure = failure
        self.calls = 0

    @property
    def dimensions(self) -> int:
        return self._dimensions

    async def embed(self, texts):
        self.calls += 1
        if self.failure is not None:
            raise self.failure
        import hashlib
        import math
        import re

        vectors = []
        for text in texts:
            vector = [0.0] * self._dimensions
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                vector[int.from_bytes(digest, "big") % self._dimensions] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            vectors.append([v / norm for v in vector])
        return vectors


class FakeEmbedderRegistry:
    def __init__(self, embedder: HashingEmbedder | None = None) -> None:
        self.embedder = embedder or HashingEmbedder()

    def get(self, model: str, dimensions: int) -> HashingEmbedder:
        if dimensions != self.embedder.dimensions:
            return HashingEmbedder(dimensions, self.embedder.failure)
        return self.embedder


def _install_processing_methods() -> None:
    """Give FakeFiles the processing operations of the FileRepository port."""

    async def get_by_id(self, org_id, record_id):
        f = self.rows.get(record_id)
        return f if f and f.org_id == org_id else None

    async def begin_attempt(self, org_id, record_id):
        self.runs = getattr(self, "runs", {})
        self.runs[record_id] = self.runs.get(record_id, 0) + 1
        return self.runs[record_id]

    async def lock_if_chunking(self, org_id, record_id):
        f = self.rows.get(record_id)
        return bool(f and f.org_id == org_id and f.processing_status is ProcessingStatus.CHUNKING)

    async def set_status(self, org_id, record_id, status, error=None):
        f = self.rows[record_id]
        self.rows[record_id] = dataclasses.replace(
            f, processing_status=status, processing_error=error
        )
        self.history = getattr(self, "history", [])
        self.history.append(status)

    async def set_image_keys(self, org_id, record_id, keys):
        self.rows[record_id] = dataclasses.replace(self.rows[record_id], image_keys=list(keys))

    async def set_extracted_data(self, org_id, record_id, data):
        self.rows[record_id] = dataclasses.replace(self.rows[record_id], extracted_data=data)

    async def restart(self, org_id, record_id):
        self.rows[record_id] = dataclasses.replace(
            self.rows[record_id],
            processing_status=ProcessingStatus.PARSING,
            processing_error=None,
        )
        getattr(self, "runs", {}).pop(record_id, None)

    for function in (
        get_by_id,
        begin_attempt,
        lock_if_chunking,
        set_status,
        set_image_keys,
        set_extracted_data,
        restart,
    ):
        setattr(FakeFiles, function.__name__, function)


_install_processing_methods()


class FakeChunks:
    def __init__(self) -> None:
        self.stored: dict[tuple[int, str], list] = {}

    def snapshot(self) -> Any:
        return dict(self.stored)

    def restore(self, saved: Any) -> None:
        self.stored = dict(saved)

    async def replace_for_file(
        self, org_id, *, knowledge_base_id, file_record_id, embedding_model, dimensions, chunks
    ):
        self.stored[(file_record_id, embedding_model)] = list(chunks)

    async def passages_for_file(self, org_id, file_record_id, embedding_model):
        return [item.chunk for item in self.stored.get((file_record_id, embedding_model), [])]

    async def delete_for_knowledge_base(self, org_id, knowledge_base_id, *, except_model):
        self.stored = {k: v for k, v in self.stored.items() if k[1] == except_model}

    async def search(self, org_id, *, query, scopes, top_k):
        return []


class FakeEmbeddingParts:
    """Staged parts in memory; published passages go to the given `FakeChunks`."""

    def __init__(self, chunks: FakeChunks) -> None:
        self.chunks = chunks
        self.parts: dict[int, dict[str, Any]] = {}
        self._next = 1

    def snapshot(self) -> Any:
        return {k: dict(v) for k, v in self.parts.items()}

    def restore(self, saved: Any) -> None:
        self.parts = {k: dict(v) for k, v in saved.items()}

    async def stage(self, org_id, *, file_record_id, models, parts):
        await self.discard(org_id, file_record_id)
        ids = []
        for number, passages in enumerate(parts):
            self.parts[self._next] = {
                "org": org_id, "file": file_record_id, "part": number, "models": list(models),
                "passages": list(passages), "starts": 0, "done": False, "vectors": [],
            }  # fmt: skip
            ids.append(self._next)
            self._next += 1
        return ids

    async def begin(self, org_id, part_id):
        from application.ports.embedding_parts import StagedPart

        part = self.parts.get(part_id)
        if part is None or part["org"] != org_id:
            return None
        part["starts"] += 1
        return StagedPart(
            file_record_id=part["file"],
            passages=list(part["passages"]),
            models=list(part["models"]),
            starts=part["starts"],
            done=part["done"],
        )

    async def save(self, org_id, part_id, embedded):
        part = self.parts.get(part_id)
        if part is None or part["org"] != org_id:
            return None
        part["done"], part["vectors"] = True, list(embedded)
        same_file = [p for p in self.parts.values() if p["file"] == part["file"]]
        return sum(1 for p in same_file if not p["done"])

    async def passages(self, org_id, file_record_id):
        found = [p for p in self.parts.values() if p["file"] == file_record_id]
        return sorted((c for p in found for c in p["passages"]), key=lambda c: c.index)

    async def publish(self, org_id, *, knowledge_base_id, file_record_id, models):
        found = [p for p in self.parts.values() if p["file"] == file_record_id]
        for choice in models:
            chunks = sorted(
                (
                    item
                    for p in found
                    for embedded in p["vectors"]
                    if embedded.model == choice
                    for item in embedded.chunks
                ),
                key=lambda item: item.chunk.index,
            )
            await self.chunks.replace_for_file(
                org_id,
                knowledge_base_id=knowledge_base_id,
                file_record_id=file_record_id,
                embedding_model=choice.model,
                dimensions=choice.dimensions,
                chunks=chunks,
            )
        await self.discard(org_id, file_record_id)

    async def discard(self, org_id, file_record_id, *, if_staged=None):
        if if_staged is not None and self.parts.get(if_staged, {}).get("file") != file_record_id:
            return False
        before = len(self.parts)
        self.parts = {k: v for k, v in self.parts.items() if v["file"] != file_record_id}
        return len(self.parts) != before


class FakeExtractor:
    """Returns a Markdown document of the bytes, or raises what it was given."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure

    def extract(self, data, *, content_type, file_name, limits):
        from domain.extraction import ExtractedDocument, ExtractedImage

        if self.failure is not None:
            raise self.failure
        images = [
            ExtractedImage(
                name="page-0001.png", data=b"png", content_type="image/png", page_number=1
            )
        ]
        return ExtractedDocument(markdown=data.decode(), images=images)


class FakeChunker:
    """One passage per paragraph."""

    def split(self, document, *, size, overlap):
        from domain.chunks import TextChunk

        parts = [p for p in document.markdown.split("\n\n") if p.strip()]
        return [
            TextChunk(index=i, text=p, page_number=None, start_char=0, end_char=len(p))
            for i, p in enumerate(parts)
        ]
