"""`InProcessChatStreams`: local readers get batches as they are emitted, remote readers
replay the run log; both say when nothing happens for a while. A remote reader ends a run
whose producer went away with an `error`, failing it itself once its heartbeat is stale."""

from __future__ import annotations

import asyncio

from adapters.chat.run_streams import InProcessChatStreams
from domain import chat_stream
from domain.conversations import StreamStatus
from tests.fakes.chat import STALLED, FakeRunLog


async def read_all(streams: InProcessChatStreams, run_id: str) -> list[list[dict]]:
    return [batch async for batch in streams.follow("org_a", run_id)]


async def test_a_local_reader_gets_what_was_emitted_then_the_rest_live():
    streams = InProcessChatStreams(FakeRunLog())
    writer = streams.open("r1")
    writer.emit(chat_stream.start("m"))
    writer.emit(chat_stream.start_step())
    reader = asyncio.create_task(read_all(streams, "r1"))
    await asyncio.sleep(0.01)
    writer.emit(chat_stream.finish())
    writer.close()
    batches = await reader
    assert batches == [
        [chat_stream.start("m"), chat_stream.start_step()],
        [chat_stream.finish()],
    ]
    assert streams.local_runs == 0


async def test_after_the_first_words_a_reader_gets_merged_batches_and_the_end_at_once():
    streams = InProcessChatStreams(FakeRunLog(), coalesce=0.2)
    writer = streams.open("r1")
    reader = asyncio.create_task(read_all(streams, "r1"))
    writer.emit(chat_stream.start("m"))
    await asyncio.sleep(0.01)
    writer.emit(chat_stream.text_start("t"))
    writer.emit(chat_stream.text_delta("t", "Hel"))
    await asyncio.sleep(0.01)
    for piece in ("lo", ", ", "world"):
        writer.emit(chat_stream.text_delta("t", piece))
        await asyncio.sleep(0.01)
    loop = asyncio.get_running_loop()
    closed_at = loop.time()
    writer.emit(chat_stream.text_end("t"))
    writer.emit(chat_stream.finish())
    writer.close()
    batches = await reader

    assert loop.time() - closed_at < 0.1
    assert batches == [
        [chat_stream.start("m")],
        [chat_stream.text_start("t"), chat_stream.text_delta("t", "Hel")],
        [
            chat_stream.text_delta("t", "lo, world"),
            chat_stream.text_end("t"),
            chat_stream.finish(),
        ],
    ]


async def test_words_keep_coming_every_coalescing_interval():
    streams = InProcessChatStreams(FakeRunLog(), coalesce=0.05)
    writer = streams.open("r1")
    reader = asyncio.create_task(read_all(streams, "r1"))
    writer.emit(chat_stream.text_start("t"))
    for _ in range(30):
        writer.emit(chat_stream.text_delta("t", "x"))
        await asyncio.sleep(0.01)
    writer.close()
    batches = await reader

    deltas = [c["delta"] for batch in batches for c in batch if c["type"] == "text-delta"]
    assert "".join(deltas) == "x" * 30
    assert 4 <= len(batches) <= 12


async def test_a_quiet_local_run_yields_empty_batches():
    streams = InProcessChatStreams(FakeRunLog(), idle=0.01)
    writer = streams.open("r1")
    reader = asyncio.create_task(read_all(streams, "r1"))
    await asyncio.sleep(0.05)
    writer.emit(chat_stream.finish())
    writer.close()
    batches = await reader
    assert batches[0] == []
    assert batches[-1] == [chat_stream.finish()]


async def test_a_run_of_another_process_is_replayed_from_the_log_until_it_ends():
    log = FakeRunLog()
    log.start("r2")
    streams = InProcessChatStreams(log, poll_interval=0.005, idle=0.02)
    await log.append("org_a", "r2", first_seq=0, chunks=[chat_stream.start("m")], parts=[])
    reader = asyncio.create_task(read_all(streams, "r2"))
    await asyncio.sleep(0.05)
    await log.finish(
        "org_a",
        "r2",
        status=StreamStatus.COMPLETED,
        first_seq=1,
        chunks=[chat_stream.finish()],
        parts=[],
    )
    batches = await asyncio.wait_for(reader, 5)
    assert batches[0] == [chat_stream.start("m")]
    assert [] in batches
    assert batches[-1] == [chat_stream.finish()]


async def test_an_unknown_run_ends_at_once():
    streams = InProcessChatStreams(FakeRunLog())
    assert await read_all(streams, "nope") == []


async def test_a_run_the_reaper_failed_ends_with_its_error():
    log = FakeRunLog()
    log.start("r3")
    await log.append("org_a", "r3", first_seq=0, chunks=[chat_stream.start("m")], parts=[])
    streams = InProcessChatStreams(log, poll_interval=0.005, idle=0.02, stale_after=60)
    reader = asyncio.create_task(read_all(streams, "r3"))
    await asyncio.sleep(0.05)
    log.reap("r3", "The server went away.")
    batches = await asyncio.wait_for(reader, 5)
    assert batches[0] == [chat_stream.start("m")]
    assert batches[-1] == [chat_stream.error("The server went away."), chat_stream.finish()]
    assert all(batch == [] for batch in batches[1:-1])


async def test_a_run_ended_without_an_ending_or_error_gets_a_generic_one():
    log = FakeRunLog()
    log.start("r3")
    log.status["r3"] = StreamStatus.FAILED
    streams = InProcessChatStreams(log, poll_interval=0.005)
    assert await read_all(streams, "r3") == [
        [chat_stream.error("The response stopped unexpectedly. Please try again."),
         chat_stream.finish()],
    ]  # fmt: skip


async def test_a_reader_fails_a_run_whose_heartbeat_is_stale_at_once():
    log = FakeRunLog()
    log.start("r4")
    produced = [
        chat_stream.start("m"),
        chat_stream.text_start("t1"),
        chat_stream.text_delta("t1", "Done."),
        chat_stream.text_end("t1"),
        chat_stream.text_start("t2"),
        chat_stream.text_delta("t2", "Half an ans"),
    ]
    await log.append("org_a", "r4", first_seq=0, chunks=produced, parts=[])
    log.alive_at["r4"] -= 100
    streams = InProcessChatStreams(log, poll_interval=0.005, stale_after=30)
    batches = await asyncio.wait_for(read_all(streams, "r4"), 5)
    # The text being written is closed first, as a producer that fails closes it.
    assert batches == [
        produced,
        [chat_stream.text_end("t2"), chat_stream.error(STALLED), chat_stream.finish()],
    ]
    assert log.status["r4"] is StreamStatus.FAILED


async def test_a_reader_fails_a_run_once_its_producer_stops_beating():
    log = FakeRunLog()
    log.start("r5")
    await log.append("org_a", "r5", first_seq=0, chunks=[chat_stream.start("m")], parts=[])
    streams = InProcessChatStreams(log, poll_interval=0.005, idle=0.05, stale_after=0.2)
    loop = asyncio.get_running_loop()
    began = loop.time()
    batches = await asyncio.wait_for(read_all(streams, "r5"), 5)
    assert 0.15 <= loop.time() - began < 1.0
    assert batches[-1] == [chat_stream.error(STALLED), chat_stream.finish()]
    assert log.status["r5"] is StreamStatus.FAILED


async def test_a_quiet_run_that_still_beats_is_not_failed():
    log = FakeRunLog()
    log.start("r6")
    await log.append("org_a", "r6", first_seq=0, chunks=[chat_stream.start("m")], parts=[])
    streams = InProcessChatStreams(log, poll_interval=0.005, idle=0.05, stale_after=0.3)
    reader = asyncio.create_task(read_all(streams, "r6"))
    for _ in range(30):
        await asyncio.sleep(0.02)
        await log.heartbeat("org_a", "r6")
    assert log.status["r6"] is StreamStatus.IN_PROGRESS
    await log.finish(
        "org_a", "r6", status=StreamStatus.COMPLETED, first_seq=1,
        chunks=[chat_stream.finish()], parts=[],
    )  # fmt: skip
    batches = await asyncio.wait_for(reader, 5)
    assert batches[0] == [chat_stream.start("m")]
    assert batches.count([]) >= 5
    assert batches[-1] == [chat_stream.finish()]
    # Its liveness is asked when its heartbeat could be stale, not at every poll.
    assert 1 <= log.stall_checks <= 6
