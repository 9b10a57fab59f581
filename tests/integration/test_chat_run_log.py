"""PgChatRunLog and PgUsageLedger against the real database: each call its own checkout in the
run's organization, as the background tasks use them; and readers of the log ending runs whose
producer went away."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest
from sqlalchemy import text

from adapters.chat.run_streams import InProcessChatStreams
from adapters.postgres.chat_runs import PgChatRunLog
from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import FairGate, org_connection
from domain import chat_stream
from domain.conversations import NewConversation, StreamStatus, TitleSource

pytestmark = pytest.mark.usefixtures("clean")


@pytest.fixture
def log(app_pool) -> PgChatRunLog:
    return PgChatRunLog(app_pool, FairGate(2))


async def start(app_pool, owner_engine, org="org_a"):
    """A conversation of `org` with a run in progress; returns (thread_id, run)."""
    async with owner_engine.begin() as connection:
        agent = (
            await connection.execute(
                text(
                    "INSERT INTO agents (org_id, user_id, name, model) "
                    "VALUES (:org, 'u', 'A', 'local:m') RETURNING id"
                ),
                {"org": org},
            )
        ).scalar_one()
    thread = str(uuid.uuid4())
    async with org_connection(app_pool, org) as db:
        repo = PgConversationRepository(db)
        await repo.add(
            NewConversation(
                thread_id=thread, org_id=org, user_id="user_1", agent_id=agent, title="T",
                title_source=TitleSource.SUPPLIED, upstream_conversation_id=None,
            )
        )  # fmt: skip
        run = await repo.start_run(
            org, thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
        )
        await db.commit()
    return thread, run


async def state(owner_engine, run_id):
    """(run status, cancel flag, chunk count, error, message status, message parts,
    conversation stream status), read as the owner."""
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT r.status, r.cancel_requested, r.chunk_count, r.error, m.status, "
                    "m.parts, c.stream_status FROM chat_runs r "
                    "JOIN chat_messages m ON m.id = r.message_id "
                    "JOIN conversations c ON c.thread_id = r.thread_id WHERE r.id = :id"
                ),
                {"id": run_id},
            )
        ).one_or_none()
    return tuple(row) if row else None


def text_chunks(message_id):
    return [
        chat_stream.start(message_id),
        chat_stream.start_step(),
        chat_stream.text_start("t0"),
        chat_stream.text_delta("t0", "Grüße, "),
        chat_stream.text_delta("t0", 'a "quoted" answer\n'),
    ]


async def test_append_stores_chunks_and_parts_and_a_repeat_is_harmless(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    chunks = text_chunks(run.message_id)
    parts = [{"type": "text", "text": 'Grüße, a "quoted" answer\n'}]
    assert await log.append("org_a", run.id, first_seq=0, chunks=chunks[:3], parts=[]) is False
    assert await log.append("org_a", run.id, first_seq=3, chunks=chunks[3:], parts=parts) is False
    # The producer retrying a write it thought failed:
    assert await log.append("org_a", run.id, first_seq=3, chunks=chunks[3:], parts=parts) is False
    assert await log.append("org_a", run.id, first_seq=0, chunks=[], parts=parts) is False
    stored, status = await log.read("org_a", run.id, after_seq=-1)
    assert stored == chunks
    assert status is StreamStatus.IN_PROGRESS
    assert await state(owner_engine, run.id) == (
        "in_progress", False, 5, None, "in_progress", parts, "in_progress",
    )  # fmt: skip


async def test_read_returns_the_chunks_after_a_sequence_number(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    chunks = text_chunks(run.message_id)
    await log.append("org_a", run.id, first_seq=0, chunks=chunks, parts=[])
    assert await log.read("org_a", run.id, after_seq=2) == (chunks[3:], StreamStatus.IN_PROGRESS)
    assert await log.read("org_a", run.id, after_seq=4) == ([], StreamStatus.IN_PROGRESS)
    assert await log.read("org_a", str(uuid.uuid4()), after_seq=-1) == ([], None)


async def test_a_cancel_request_reaches_the_producer(app_pool, owner_engine, log):
    thread, run = await start(app_pool, owner_engine)
    assert await log.heartbeat("org_a", run.id) is False
    async with org_connection(app_pool, "org_a") as db:
        await PgConversationRepository(db).request_cancel("org_a", thread)
        await db.commit()
    assert await log.heartbeat("org_a", run.id) is True
    assert await log.append("org_a", run.id, first_seq=0, chunks=[], parts=[]) is True


async def test_heartbeat_moves_the_liveness_time(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE chat_runs SET heartbeat_at = now() - interval '1 hour' WHERE id = :id"),
            {"id": run.id},
        )
    await log.heartbeat("org_a", run.id)
    async with owner_engine.connect() as connection:
        age = (
            await connection.execute(
                text("SELECT now() - heartbeat_at FROM chat_runs WHERE id = :id"), {"id": run.id}
            )
        ).scalar_one()
    assert age < timedelta(minutes=1)


async def test_finish_ends_run_message_and_conversation_once(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    chunks = text_chunks(run.message_id)
    await log.append("org_a", run.id, first_seq=0, chunks=chunks, parts=[])
    ending = [chat_stream.text_end("t0"), chat_stream.finish_step(), chat_stream.finish()]
    parts = [{"type": "text", "text": "done"}]
    await log.finish(
        "org_a", run.id, status=StreamStatus.COMPLETED, first_seq=5, chunks=ending, parts=parts
    )
    assert await state(owner_engine, run.id) == (
        "completed", False, 8, None, "completed", parts, "completed",
    )  # fmt: skip
    # A second ending, and any later write, change nothing and tell the producer to stop.
    await log.finish(
        "org_a", run.id, status=StreamStatus.FAILED, first_seq=8,
        chunks=[chat_stream.finish()], parts=[], error="late",
    )  # fmt: skip
    assert await log.append("org_a", run.id, first_seq=8, chunks=ending, parts=[]) is True
    assert await log.heartbeat("org_a", run.id) is True
    assert await state(owner_engine, run.id) == (
        "completed", False, 8, None, "completed", parts, "completed",
    )  # fmt: skip
    assert await log.read("org_a", run.id, after_seq=-1) == (
        chunks + ending,
        StreamStatus.COMPLETED,
    )


async def test_a_failure_keeps_what_was_produced_and_the_error(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    partial = [{"type": "text", "text": "Half an ans"}]
    await log.append(
        "org_a", run.id, first_seq=0, chunks=text_chunks(run.message_id), parts=partial
    )
    await log.finish(
        "org_a", run.id, status=StreamStatus.FAILED, first_seq=5,
        chunks=[{"type": "error", "errorText": "The model stopped"}], parts=partial,
        error="The model stopped",
    )  # fmt: skip
    assert await state(owner_engine, run.id) == (
        "failed", False, 6, "The model stopped", "failed", partial, "failed",
    )  # fmt: skip
    with pytest.raises(ValueError, match="terminal"):
        await log.finish(
            "org_a", run.id, status=StreamStatus.IN_PROGRESS, first_seq=6, chunks=[], parts=[]
        )


async def test_a_run_failed_by_the_reaper_stays_failed(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE chat_runs SET heartbeat_at = now() - interval '1 hour' WHERE id = :id"),
            {"id": run.id},
        )
        reaped = (
            await connection.execute(
                text("SELECT run_id FROM ap_reap_stalled_chat_runs('1 minute')")
            )
        ).all()
    assert [str(r[0]) for r in reaped] == [run.id]
    assert await log.append("org_a", run.id, first_seq=0, chunks=[{"type": "start"}], parts=[])
    await log.finish(
        "org_a", run.id, status=StreamStatus.COMPLETED, first_seq=0, chunks=[], parts=[]
    )
    run_status, _, count, error, message_status, _, stream_status = await state(
        owner_engine, run.id
    )
    assert (run_status, count, message_status, stream_status) == ("failed", 0, "failed", "failed")
    assert error.startswith("The response stopped")
    assert await log.read("org_a", run.id, after_seq=-1) == ([], StreamStatus.FAILED)


async def test_an_older_run_ending_leaves_a_newer_ones_status(app_pool, owner_engine, log):
    thread, old = await start(app_pool, owner_engine)
    async with org_connection(app_pool, "org_a") as db:
        new = await PgConversationRepository(db).start_run(
            "org_a", thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
        )
        await db.commit()
    await log.finish(
        "org_a", old.id, status=StreamStatus.CANCELLED, first_seq=0, chunks=[], parts=[]
    )
    assert (await state(owner_engine, old.id))[0] == "cancelled"
    assert (await state(owner_engine, new.id))[-1] == "in_progress"
    await log.finish(
        "org_a", new.id, status=StreamStatus.COMPLETED, first_seq=0, chunks=[], parts=[]
    )
    assert (await state(owner_engine, new.id))[-1] == "completed"


async def test_a_deleted_conversation_stops_the_producer_without_errors(
    app_pool, owner_engine, log
):
    thread, run = await start(app_pool, owner_engine)
    await log.append("org_a", run.id, first_seq=0, chunks=[{"type": "start"}], parts=[])
    async with org_connection(app_pool, "org_a") as db:
        assert await PgConversationRepository(db).delete("org_a", thread)
        await db.commit()
    assert await log.append("org_a", run.id, first_seq=1, chunks=[{"type": "x"}], parts=[]) is True
    assert await log.heartbeat("org_a", run.id) is True
    await log.finish(
        "org_a", run.id, status=StreamStatus.CANCELLED, first_seq=1, chunks=[], parts=[]
    )
    assert await log.read("org_a", run.id, after_seq=-1) == ([], None)
    async with owner_engine.connect() as connection:
        left = (await connection.execute(text("SELECT count(*) FROM chat_run_chunks"))).scalar_one()
    assert left == 0


async def test_another_organization_can_neither_read_nor_write_a_run(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    await log.append("org_a", run.id, first_seq=0, chunks=[{"type": "start"}], parts=[])
    assert await log.read("org_b", run.id, after_seq=-1) == ([], None)
    assert await log.append("org_b", run.id, first_seq=1, chunks=[{"type": "x"}], parts=[]) is True
    await log.finish(
        "org_b", run.id, status=StreamStatus.FAILED, first_seq=1, chunks=[], parts=[], error="x"
    )
    assert await state(owner_engine, run.id) == (
        "in_progress", False, 1, None, "in_progress", [], "in_progress",
    )  # fmt: skip
    assert await log.read("org_a", run.id, after_seq=-1) == (
        [{"type": "start"}],
        StreamStatus.IN_PROGRESS,
    )


STALLED = (
    "The response stopped before it finished (the server producing it went away). "
    "Send the message again to retry."
)


async def stop_beating(owner_engine, *run_ids, seconds=3600):
    """As if the runs' producers had gone away `seconds` ago."""
    async with owner_engine.begin() as connection:
        for run_id in run_ids:
            await connection.execute(
                text(
                    "UPDATE chat_runs SET heartbeat_at = now() - make_interval(secs => :s) "
                    "WHERE id = :id"
                ),
                {"id": run_id, "s": seconds},
            )


async def stream_status(app_pool, thread):
    async with org_connection(app_pool, "org_a") as db:
        conversation = await PgConversationRepository(db).get("org_a", thread)
    return conversation.stream_status


async def test_fail_if_stalled_fails_only_a_run_whose_heartbeat_is_stale(
    app_pool, owner_engine, log
):
    _, run = await start(app_pool, owner_engine)
    chunks = text_chunks(run.message_id)
    parts = [{"type": "text", "text": "Half"}]
    await log.append("org_a", run.id, first_seq=0, chunks=chunks, parts=parts)
    alive = await log.fail_if_stalled("org_a", run.id, stale_after=30)
    assert (alive.status, alive.error) == (StreamStatus.IN_PROGRESS, None)
    assert 0 <= alive.silent_for < 10
    await stop_beating(owner_engine, run.id, seconds=40)
    # Another organization can neither see nor fail it.
    assert await log.fail_if_stalled("org_b", run.id, stale_after=30) is None
    assert (await log.fail_if_stalled("org_a", run.id, stale_after=60)).status is (
        StreamStatus.IN_PROGRESS
    )
    assert (await state(owner_engine, run.id))[0] == "in_progress"

    failed = await log.fail_if_stalled("org_a", run.id, stale_after=30)
    assert (failed.status, failed.error) == (StreamStatus.FAILED, STALLED)
    assert await state(owner_engine, run.id) == (
        "failed", False, 5, STALLED, "failed", parts, "failed",
    )  # fmt: skip
    assert await log.read("org_a", run.id, after_seq=-1) == (chunks, StreamStatus.FAILED)
    # Its producer, were it still there, stops at its next write; asking again changes nothing.
    assert await log.heartbeat("org_a", run.id) is True
    again = await log.fail_if_stalled("org_a", run.id, stale_after=30)
    assert (again.status, again.error) == (StreamStatus.FAILED, STALLED)
    assert await log.fail_if_stalled("org_a", str(uuid.uuid4()), stale_after=30) is None


async def test_the_reaper_still_fails_the_stalled_runs_of_every_organization(
    app_pool, owner_engine, log
):
    _, stalled_a = await start(app_pool, owner_engine, "org_a")
    _, stalled_b = await start(app_pool, owner_engine, "org_b")
    _, alive = await start(app_pool, owner_engine, "org_a")
    await stop_beating(owner_engine, stalled_a.id, stalled_b.id)
    # As the worker calls it: the app role, whatever organization its connection was last in.
    async with org_connection(app_pool, "org_a") as db:
        reaped = await db.fetch("SELECT run_id FROM ap_reap_stalled_chat_runs('1 minute')")
    assert sorted(str(r[0]) for r in reaped) == sorted([stalled_a.id, stalled_b.id])
    for run in (stalled_a, stalled_b):
        assert await state(owner_engine, run.id) == (
            "failed", False, 0, STALLED, "failed", [], "failed",
        )  # fmt: skip
    assert (await state(owner_engine, alive.id))[0] == "in_progress"


async def follow(log, run_id, **options):
    streams = InProcessChatStreams(log, poll_interval=0.01, **options)
    return [batch async for batch in streams.follow("org_a", run_id)]


async def test_a_follower_of_a_run_whose_producer_went_away_fails_it(app_pool, owner_engine, log):
    thread, run = await start(app_pool, owner_engine)
    first = text_chunks(run.message_id)
    await log.append("org_a", run.id, first_seq=0, chunks=first, parts=[])
    await stop_beating(owner_engine, run.id, seconds=45)
    batches = await asyncio.wait_for(follow(log, run.id, stale_after=30), 10)
    assert batches == [
        first,
        [chat_stream.text_end("t0"), chat_stream.error(STALLED), chat_stream.finish()],
    ]
    assert (await state(owner_engine, run.id))[0] == "failed"
    assert await stream_status(app_pool, thread) is StreamStatus.FAILED


async def test_a_follower_of_a_reaped_run_gets_the_reapers_error(app_pool, owner_engine, log):
    _, run = await start(app_pool, owner_engine)
    first = [chat_stream.start(run.message_id)]
    await log.append("org_a", run.id, first_seq=0, chunks=first, parts=[])
    await stop_beating(owner_engine, run.id)
    async with owner_engine.begin() as connection:
        await connection.execute(text("SELECT * FROM ap_reap_stalled_chat_runs('1 minute')"))
    batches = await asyncio.wait_for(follow(log, run.id, stale_after=7200), 10)
    assert batches == [first, [chat_stream.error(STALLED), chat_stream.finish()]]


async def test_a_quiet_run_whose_producer_beats_is_followed_not_failed(app_pool, owner_engine, log):
    thread, run = await start(app_pool, owner_engine)
    first = [chat_stream.start(run.message_id)]
    await log.append("org_a", run.id, first_seq=0, chunks=first, parts=[])
    reader = asyncio.create_task(follow(log, run.id, idle=0.2, stale_after=0.6))
    for _ in range(12):
        await asyncio.sleep(0.1)
        await log.heartbeat("org_a", run.id)
    assert (await state(owner_engine, run.id))[0] == "in_progress"
    await log.finish(
        "org_a", run.id, status=StreamStatus.COMPLETED, first_seq=1,
        chunks=[chat_stream.finish()], parts=[],
    )  # fmt: skip
    batches = await asyncio.wait_for(reader, 10)
    assert batches[0] == first
    assert [] in batches
    assert batches[-1] == [chat_stream.finish()]
    assert await stream_status(app_pool, thread) is StreamStatus.COMPLETED
