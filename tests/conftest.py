"""Shared fixtures: one embedded PostgreSQL for the whole run, migrated once; each test that
touches the database starts from empty tables."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from adapters.postgres.database import create_pool
from adapters.postgres.embedded import start_embedded_postgres
from adapters.postgres.engine import create_engine
from adapters.postgres.migrations import migrate
from adapters.postgres.models import metadata
from entrypoints.database import Database

# pgqueuer's tables are its own, installed by its script and not modelled.
QUEUE_TABLES = ("pgqueuer", "pgqueuer_log", "pgqueuer_statistics")
TABLES = ", ".join((*sorted(metadata.tables), *QUEUE_TABLES))
"""Every table a test may write, for `TRUNCATE`: the models' and the queue's."""


@pytest.fixture(scope="session")
def tmp_root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="ap-tests-") as root:
        os.chmod(root, 0o755)
        yield Path(root)


@pytest.fixture(scope="session")
def embedded(tmp_root: Path) -> Iterator[Database]:
    server, url = start_embedded_postgres(tmp_root / "pg", database="ap_test")
    yield Database(url, server)
    # Stopped here, while its data dir still exists: the exit hook would find it gone.
    server.cleanup()


@pytest.fixture(scope="session")
async def database(embedded: Database) -> Database:
    await migrate(embedded.url)
    return embedded


@pytest.fixture(scope="session")
async def owner_engine(database: Database) -> AsyncIterator[AsyncEngine]:
    """Connects as the tables' owner (a superuser here): for arranging and inspecting."""
    engine = create_engine(database.url)
    yield engine
    await engine.dispose()


@pytest.fixture
async def app_pool(database) -> AsyncIterator[asyncpg.Pool]:
    """A small pool acting as the app role, as the service's own pool does."""
    pool = await create_pool(database.url, app_role="agent_platform_app", size=2)
    yield pool
    await pool.close()


@pytest.fixture
def registry():
    """A deterministic embedder registry (see tests.fakes.HashingEmbedder)."""
    from tests.fakes import FakeEmbedderRegistry

    return FakeEmbedderRegistry()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3-compatible server (moto in server mode) on loopback, with test credentials."""
    from moto.moto_server.threaded_moto_server import ThreadedMotoServer

    os.environ.setdefault("AWS_ACCESS_KEY_ID", "test")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "test")
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
async def clean(owner_engine: AsyncEngine) -> None:
    async with owner_engine.begin() as connection:
        await connection.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))


# Modules that run llama.cpp, torch or `serve` take both cores on their own. Under
# `pytest -n 2 --dist loadgroup` each group runs on one xdist worker, one module after another:
# the llama.cpp modules in one, the modules that start `serve` or torch in the other, so two
# llama.cpp processes never spin on the same cores; the light modules fill in around them
# (each module stays on one worker, for its fixtures).
HEAVY_GROUPS = {
    "llama": (
        "tests/e2e/test_chat_serve.py",
        "tests/e2e/test_faults.py",
        "tests/integration/test_chat_model_local.py",
        "tests/integration/test_chat_model_openai.py",
        "tests/integration/test_structured_extraction.py",
        "tests/integration/test_llama_build.py",
        "tests/http/test_processing_local_model.py",
    ),
    "serve": (
        "tests/e2e/",
        "tests/browser/",
        "tests/integration/test_embeddings_local.py",
        "tests/integration/test_rerank_cross_encoder.py",
    ),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(str(config.rootpath))
    for item in items:
        module = Path(str(item.path)).relative_to(root).as_posix()
        group = next(
            (name for name, prefixes in HEAVY_GROUPS.items() if module.startswith(prefixes)),
            module,
        )
        item.add_marker(pytest.mark.xdist_group(group))
