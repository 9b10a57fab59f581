"""Knowledge-base totals (`knowledge_base_stats`, migration 0013) stay equal to what the files
say, through every change the service makes, the owner's reaper included."""

from __future__ import annotations

import random

import asyncpg
import pytest
from sqlalchemy import text

from adapters.postgres.database import org_connection
from adapters.postgres.files import PgFileRepository
from adapters.postgres.knowledge_bases import PgKnowledgeBaseRepository
from domain.files import ProcessingStatus
from tests.integration.test_repositories import new_file, new_kb

pytestmark = pytest.mark.usefixtures("clean")

FROM_FILES = """
    SELECT knowledge_base_id, count(*), coalesce(sum(file_size), 0),
           count(*) FILTER (WHERE processing_status NOT IN
               ('completed', 'parse_failed', 'chunk_failed', 'extract_failed')),
           coalesce(sum(chunk_count), 0), max(created_at)
    FROM knowledge_base_files GROUP BY 1"""
FROM_STATS = """
    SELECT knowledge_base_id, file_count, total_size, files_in_progress, chunk_count,
           last_file_uploaded_at
    FROM knowledge_base_stats WHERE file_count > 0"""


async def totals(owner_engine, statement):
    async with owner_engine.connect() as connection:
        rows = (await connection.execute(text(statement))).all()
    return {row[0]: tuple(row[1:]) for row in rows}


async def test_totals_follow_every_change_of_the_files(app_pool, owner_engine):
    rng = random.Random(7)
    files: dict[str, list[int]] = {"org_a": [], "org_b": []}
    kbs: dict[str, list[int]] = {}
    for org in files:
        async with org_connection(app_pool, org) as db:
            repo = PgKnowledgeBaseRepository(db)
            kbs[org] = [(await repo.add(new_kb(org, name=f"KB {i}"))).id for i in range(3)]
            await db.commit()
    statuses = list(ProcessingStatus)
    for _ in range(300):
        org = rng.choice(list(files))
        async with org_connection(app_pool, org) as db:
            repo = PgFileRepository(db)
            action = rng.random()
            if action < 0.4 or not files[org]:
                size = rng.choice([None, 0, rng.randrange(1, 10**9)])
                added = await repo.add(new_file(rng.choice(kbs[org]), org=org, size=size))
                files[org].append(added.id)
            elif action < 0.7:
                await repo.set_status(org, rng.choice(files[org]), rng.choice(statuses))
            elif action < 0.8:
                await repo.restart(org, rng.choice(files[org]))
            elif action < 0.9:
                await db.execute(
                    "UPDATE knowledge_base_files SET chunk_count = $2 WHERE id = $1",
                    rng.choice(files[org]),
                    rng.randrange(0, 5000),
                )
            else:
                record = files[org].pop(rng.randrange(len(files[org])))
                await repo.delete(org, record)
            await db.commit()
    expected = await totals(owner_engine, FROM_FILES)
    assert len(expected) == 6
    assert await totals(owner_engine, FROM_STATS) == expected

    # The reaper runs as the owner, across organizations, without app.org_id.
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE knowledge_base_files SET updated_at = now() - interval '2 hours'")
        )
        reaped = (
            await connection.execute(text("SELECT * FROM ap_reap_stalled_files('1 hour')"))
        ).all()
    assert reaped
    assert await totals(owner_engine, FROM_STATS) == await totals(owner_engine, FROM_FILES)

    # Deleting a knowledge base takes its totals with it.
    async with org_connection(app_pool, "org_a") as db:
        for kb_id in kbs["org_a"]:
            await PgKnowledgeBaseRepository(db).delete("org_a", kb_id)
        await db.commit()
    remaining = await totals(owner_engine, "SELECT knowledge_base_id, 1 FROM knowledge_base_stats")
    assert set(remaining) == {kb for kb in expected if kb in kbs["org_b"]}


async def test_the_newest_upload_falls_back_when_the_newest_file_goes(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        kbs, files = PgKnowledgeBaseRepository(db), PgFileRepository(db)
        kb = await kbs.add(new_kb())
        older = await files.add(new_file(kb.id))
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        newer = await PgFileRepository(db).add(new_file(kb.id))
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        kbs, files = PgKnowledgeBaseRepository(db), PgFileRepository(db)
        summary = await kbs.get_summary("org_a", kb.id)
        assert summary is not None
        assert summary.last_file_uploaded_at == newer.created_at
        await files.delete("org_a", newer.id)
        summary = await kbs.get_summary("org_a", kb.id)
        assert summary is not None
        assert summary.last_file_uploaded_at == older.created_at
        assert (summary.file_count, summary.files_in_progress) == (1, 1)
        await files.delete("org_a", older.id)
        summary = await kbs.get_summary("org_a", kb.id)
        assert summary is not None
        assert (summary.file_count, summary.total_size, summary.last_file_uploaded_at) == (
            0,
            0,
            None,
        )


async def test_an_organization_reads_its_own_totals_and_writes_none(app_pool):
    async with org_connection(app_pool, "org_b") as db:
        kb_b = await PgKnowledgeBaseRepository(db).add(new_kb("org_b"))
        await PgFileRepository(db).add(new_file(kb_b.id, org="org_b", size=5))
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        assert await db.fetch("SELECT * FROM knowledge_base_stats") == []
    # The totals are the trigger's to write (migration 0016), not even an organization's own.
    for org, statement in (
        ("org_a", "UPDATE knowledge_base_stats SET file_count = 0 WHERE knowledge_base_id = $1"),
        ("org_b", "UPDATE knowledge_base_stats SET file_count = 0 WHERE knowledge_base_id = $1"),
        ("org_b", "INSERT INTO knowledge_base_stats (knowledge_base_id, org_id) VALUES ($1, 'b')"),
        ("org_b", "DELETE FROM knowledge_base_stats WHERE knowledge_base_id = $1"),
    ):
        async with org_connection(app_pool, org) as db:
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await db.execute(statement, kb_b.id)
    async with org_connection(app_pool, "org_b") as db:
        summary = await PgKnowledgeBaseRepository(db).get_summary("org_b", kb_b.id)
    assert summary is not None
    assert (summary.file_count, summary.total_size) == (1, 5)
