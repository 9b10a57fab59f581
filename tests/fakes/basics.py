"""Fakes of the cross-cutting ports: the clock, the unit of work, the job queue, object storage
and the member directory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from application.ports.job_queue import Job
from application.ports.object_storage import SignedUpload, StoredObject
from domain.errors import NotFound
from domain.identity import Identity
from domain.members import Invitation, Member, MembershipSet

if TYPE_CHECKING:
    from application.ports.clock import Clock
    from application.ports.job_queue import JobQueue
    from application.ports.member_directory import MemberDirectory
    from application.ports.object_storage import ObjectStorage
    from application.ports.unit_of_work import UnitOfWork
    from tests.fakes.members import FakeIdentityDirectory

State = TypeVar("State")


class Restorable(Protocol[State]):
    """A fake store a `FakeUnitOfWork` can roll back: `restore(snapshot())` puts it back."""

    def snapshot(self) -> State: ...

    def restore(self, saved: State) -> None: ...


class FakeClock:
    def __init__(self, now: datetime | None = None) -> None:
        self.current = now or datetime(2026, 1, 1, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


class FakeUnitOfWork:
    """Records commits; a rollback restores the fakes' state as of the last commit."""

    def __init__(self, *stores: Restorable[Any]) -> None:
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


class FakeJobQueue:
    def __init__(self) -> None:
        self.jobs: list[Job] = []

    def snapshot(self) -> list[Job]:
        return list(self.jobs)

    def restore(self, saved: list[Job]) -> None:
        self.jobs = list(saved)

    async def enqueue(self, job: Job) -> None:
        if job.dedupe_key and any(j.dedupe_key == job.dedupe_key for j in self.jobs):
            return
        self.jobs.append(job)


class FakeStorage:
    def __init__(self, failing_prefixes: set[str] | None = None) -> None:
        self.objects: dict[str, bytes] = {}
        self.content_types: dict[str, str] = {}
        self.failing_prefixes = failing_prefixes or set()
        self.down = False

    async def check(self) -> None:
        if self.down:
            raise OSError("storage is down")

    async def sign_upload(
        self,
        key: str,
        *,
        content_type: str,
        size: int,
        expires_at: datetime,
    ) -> SignedUpload:
        return SignedUpload(
            url=f"https://storage.test/{key}?size={size}",
            method="PUT",
            headers={"Content-Type": content_type},
            expires_at=expires_at,
        )

    async def sign_download(
        self,
        key: str,
        *,
        expires_at: datetime,
        file_name: str | None = None,
        content_type: str | None = None,
    ) -> str:
        return f"https://storage.test/{key}?download={file_name or ''}&exp={expires_at.isoformat()}"

    async def stat(self, key: str) -> StoredObject | None:
        if key not in self.objects:
            return None
        return StoredObject(size=len(self.objects[key]), content_type=self.content_types.get(key))

    async def put(self, key: str, data: bytes, *, content_type: str) -> None:
        if any(key.startswith(prefix) for prefix in self.failing_prefixes):
            raise OSError("storage unavailable")
        self.objects[key] = data
        self.content_types[key] = content_type

    async def get(self, key: str) -> bytes:
        if key not in self.objects:
            raise NotFound("Stored object not found")
        return self.objects[key]

    async def exists(self, key: str) -> bool:
        return key in self.objects

    async def delete(self, key: str) -> None:
        if any(key.startswith(prefix) for prefix in self.failing_prefixes):
            raise OSError("storage unavailable")
        self.objects.pop(key, None)
        self.content_types.pop(key, None)

    async def delete_prefix(self, prefix: str) -> int:
        if prefix in self.failing_prefixes:
            raise OSError("storage unavailable")
        doomed = [k for k in self.objects if k.startswith(prefix)]
        for key in doomed:
            del self.objects[key]
            self.content_types.pop(key, None)
        return len(doomed)


class FakeMemberDirectory:
    """Records the identities seen; given a `FakeIdentityDirectory`, also keeps its members and
    accepts its invitations as the local directory does."""

    def __init__(self, directory: FakeIdentityDirectory | None = None) -> None:
        self.seen: list[tuple[Identity, datetime]] = []
        self.forgotten: list[tuple[str, str]] = []
        self.directory = directory

    def snapshot(self) -> list[tuple[Identity, datetime]]:
        return list(self.seen)

    def restore(self, saved: list[tuple[Identity, datetime]]) -> None:
        self.seen = list(saved)

    async def record_seen(self, identity: Identity, seen_at: datetime) -> None:
        self.seen.append((identity, seen_at))
        if self.directory is not None:
            self.directory.see(identity, seen_at)

    async def accept_invitation(self, identity: Identity, at: datetime) -> Invitation | None:
        if self.directory is None:
            return None
        return self.directory.accept(identity, at)

    async def set_membership(self, membership: MembershipSet, at: datetime) -> Member | None:
        if self.directory is None:
            return None
        return self.directory.set_membership(membership)

    async def forget(self, org_id: str, user_id: str) -> bool:
        self.forgotten.append((org_id, user_id))
        if self.directory is None:
            return True
        return await self.directory.remove_member(org_id, user_id)


if TYPE_CHECKING:  # mypy checks each fake against the port it stands in for
    _clock: Clock = FakeClock()
    _unit_of_work: UnitOfWork = FakeUnitOfWork()
    _job_queue: JobQueue = FakeJobQueue()
    _job_queue_store: Restorable[list[Job]] = FakeJobQueue()
    _storage: ObjectStorage = FakeStorage()
    _members: MemberDirectory = FakeMemberDirectory()
    _members_store: Restorable[list[tuple[Identity, datetime]]] = FakeMemberDirectory()
