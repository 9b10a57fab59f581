from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
import structlog

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


@pytest.fixture
def info_level():
    """Info lines logged whatever level an earlier test of this process configured (its
    filtering logger would drop them before `capture_logs` sees them)."""
    saved = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    structlog.configure(**saved)
