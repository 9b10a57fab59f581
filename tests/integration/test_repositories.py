"""The Postgres repositories and the pgqueuer job queue against the real database."""

from __future__ import annotations

import json
import uuid
from collections import namedtuple

import pytest
from sqlalchemy import text

from adapters.postgres.database import org_connection
from adapters.postgres.files import PgFileRepository
from adapters.postgres.knowledge_bases import PgKnowledgeBaseRepository
from adapters.postgres.members import PgMemberDirectory
from adapters.queue.pgqueuer_queue import PgQueuerJobQueue
from application.ports.job_queue import Job
from domain.errors import Conflict
from domain.files import FILE_VIEW_FIELDS, FileCursor, NewFile, ProcessingStatus, view_values
from domain.identity import Identity
from domain.knowledge_bases import NewKnowledgeBase
from tests.fakes import FakeClock

pytestmark = pytest.mark.usefixtures("clean")
ListedFile = namedtuple("ListedFile", FILE_VIEW_FIELDS)


def new_kb(org="org_a", name="Docs"):
    return NewKnowledgeBase(
        org_id=org,
        user_id="u1",
        name=name,
        description="",
        embedding_model="local:m",
        embedding_dimensions=384,
        extraction_model=None,
        extraction_schema={"type": "object"},
    )


def new_file(kb_id, org="org_a", size=10):
    file_id = str(uuid.uuid4())
    return NewFile(
        org_id=org,
        knowledge_base_id=kb_id,
        file_id=file_id,
        file_name="a.md",
        file_key=f"orgs/{org}/files/{file_id}/a.md",
        content_key=f"orgs/{org}/files/{file_id}/content.md",
        content_type="text/markdown",
        file_size=size,
        user_metadata={"k": [1, 2]},
    )


async def test_knowledge_base_round_trip_and_summaries(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        kbs, files = PgKnowledgeBaseRepository(db), PgFileRepository(db)
        kb = await kbs.add(new_kb())
        empty = await kbs.add(new_kb(name="Empty"))
        await files.add(new_file(kb.id, size=10))
        await files.add(new_file(kb.id, size=None))
        await db.commit()
        summaries = await kbs.list_summaries("org_a")
    assert [s.knowledge_base.name for s in summaries] == ["Empty", "Docs"]
    empty_summary, docs = summaries
    assert (empty_summary.file_count, empty_summary.total_size) == (0, 0)
    assert empty_summary.last_file_uploaded_at is None
    assert (docs.file_count, docs.total_size, docs.files_in_progress) == (2, 10, 2)
    assert docs.knowledge_base.extraction_schema == {"type": "object"}
    assert empty.id != kb.id


async def test_files_list_newest_first_and_duplicates_conflict(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        kb = await PgKnowledgeBaseRepository(db).add(new_kb())
        files = PgFileRepository(db)
        first = await files.add(new_file(kb.id))
        second = await files.add(new_file(kb.id))
        listed = await files.list_for_knowledge_base("org_a", kb.id)
        assert [f.id for f in listed] == [second.id, first.id]
        assert listed[0].processing_status is ProcessingStatus.PARSING
        assert listed[0].user_metadata == {"k": [1, 2]}
        duplicate = new_file(kb.id)
        await files.add(duplicate)
        with pytest.raises(Conflict):
            await files.add(duplicate)


async def test_file_views_get_the_view_fields_in_order_a_page_at_a_time(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        kb = await PgKnowledgeBaseRepository(db).add(new_kb())
        other_kb = await PgKnowledgeBaseRepository(db).add(new_kb(name="Other"))
        files = PgFileRepository(db)
        added = [await files.add(new_file(kb.id)) for _ in range(3)]
        await files.add(new_file(other_kb.id))
        await files.set_image_keys("org_a", added[0].id, ["p1.png"])
        await db.commit()
        stored = {f.id: f for f in await files.list_for_knowledge_base("org_a", kb.id)}
        views = await files.list_views("org_a", kb.id, ListedFile)
        # One transaction, one `now()`: the record id alone orders them.
        assert len({v.created_at for v in views}) == 1
        assert [v.id for v in views] == [f.id for f in reversed(added)]
        assert all(tuple(v) == view_values(stored[v.id]) for v in views)
        assert views[-1].image_keys == ["p1.png"] and views[0].processing_status == "parsing"
        first = await files.list_views("org_a", kb.id, ListedFile, limit=2)
        assert first == views[:2]
        cursor = FileCursor(first[-1].created_at, first[-1].id)
        rest = await files.list_views("org_a", kb.id, ListedFile, limit=2, after=cursor)
        assert rest == views[2:]
        assert await files.list_views("org_a", kb.id, ListedFile, after=cursor) == views[2:]
        # The statement's own filter, without row-level security's help: org_a's connection
        # asking for org_b's files of the same knowledge base.
        assert await files.list_views("org_b", kb.id, ListedFile) == []
    async with org_connection(app_pool, "org_b") as db:
        assert await PgFileRepository(db).list_views("org_a", kb.id, ListedFile) == []


async def test_repositories_do_not_reach_into_another_organization(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        kb = await PgKnowledgeBaseRepository(db).add(new_kb())
        await db.commit()
    async with org_connection(app_pool, "org_b") as db:
        repo = PgKnowledgeBaseRepository(db)
        assert await repo.get("org_b", kb.id) is None
        # Even asking with the other organization's id, the connection's scope hides the row.
        assert await repo.get("org_a", kb.id) is None
        await repo.delete("org_a", kb.id)
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        assert await PgKnowledgeBaseRepository(db).get("org_a", kb.id) is not None


async def test_jobs_commit_and_roll_back_with_the_transaction(app_pool, owner_engine):
    async with org_connection(app_pool, "org_a") as db:
        queue = PgQueuerJobQueue(db)
        await queue.enqueue(Job(kind="file.process", payload={"fileRecordId": 1}, dedupe_key="a"))
        await queue.enqueue(Job(kind="file.process", payload={"fileRecordId": 1}, dedupe_key="a"))
        await db.commit()
        await queue.enqueue(Job(kind="file.process", payload={"fileRecordId": 2}))
        await db.rollback()
        await queue.enqueue(Job(kind="file.process", payload={"fileRecordId": 3}))
    async with owner_engine.connect() as connection:
        rows = (await connection.execute(text("SELECT entrypoint, payload FROM pgqueuer"))).all()
    assert [(r[0], json.loads(r[1])) for r in rows] == [("file.process", {"fileRecordId": 1})]


async def test_member_directory_upserts_without_touching_metadata(app_pool, owner_engine):
    clock = FakeClock()
    identity = Identity(user_id="u1", org_id="org_a", role="org:admin", email="a@x.io")
    async with org_connection(app_pool, "org_a") as db:
        directory = PgMemberDirectory(db)
        await directory.record_seen(identity, clock.now())
        await db.commit()
    async with owner_engine.begin() as connection:
        await connection.execute(text("UPDATE memberships SET public_metadata = '{\"team\": 1}'"))
    async with org_connection(app_pool, "org_a") as db:
        renamed = Identity(user_id="u1", org_id="org_a", role="org:member", first_name="Ada")
        await PgMemberDirectory(db).record_seen(renamed, clock.now())
        await db.commit()
        (row,) = await db.fetch("SELECT email, first_name, role, public_metadata FROM memberships")
    assert tuple(row) == ("a@x.io", "Ada", "org:member", {"team": 1})
