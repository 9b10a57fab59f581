from __future__ import annotations

from dataclasses import dataclass

import pytest

from domain.identity import ADMIN_ROLE, Caller
from tests.fakes import FakeFiles, FakeJobQueue, FakeKnowledgeBases, FakeStorage, FakeUnitOfWork


@dataclass
class World:
    files: FakeFiles
    kbs: FakeKnowledgeBases
    jobs: FakeJobQueue
    storage: FakeStorage
    uow: FakeUnitOfWork


@pytest.fixture
def world() -> World:
    files = FakeFiles()
    kbs = FakeKnowledgeBases(files)
    jobs = FakeJobQueue()
    return World(files, kbs, jobs, FakeStorage(), FakeUnitOfWork(files, kbs, jobs))


@pytest.fixture
def caller() -> Caller:
    return Caller(user_id="user_1", org_id="org_a", role=ADMIN_ROLE)


@pytest.fixture
def stranger() -> Caller:
    return Caller(user_id="user_9", org_id="org_b")
