from __future__ import annotations

from dataclasses import dataclass

import pytest

from domain.identity import ADMIN_ROLE, Caller
from tests.fakes import (
    FakeFiles,
    FakeIssuedUploads,
    FakeJobQueue,
    FakeKnowledgeBases,
    FakeStorage,
    FakeUnitOfWork,
)


@dataclass
class World:
    files: FakeFiles
    kbs: FakeKnowledgeBases
    jobs: FakeJobQueue
    storage: FakeStorage
    uow: FakeUnitOfWork
    uploads: FakeIssuedUploads


@pytest.fixture
def world() -> World:
    files = FakeFiles()
    kbs = FakeKnowledgeBases(files)
    jobs = FakeJobQueue()
    uploads = FakeIssuedUploads()
    uow = FakeUnitOfWork(files, kbs, jobs, uploads)
    return World(files, kbs, jobs, FakeStorage(), uow, uploads)


@pytest.fixture
def caller() -> Caller:
    return Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)


@pytest.fixture
def stranger() -> Caller:
    return Caller(user_id="user_9", org_id="org_b")
