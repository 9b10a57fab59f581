"""A file with more passages than one part is embedded in parts, one job each."""

from __future__ import annotations

import pytest

from application.ports.embedder import EmbeddingFailed
from application.ports.job_queue import EMBED_FILE_PART
from application.use_cases.embed_file_part import EmbedFilePart, EmbedFilePartCommand
from application.use_cases.process_file import ProcessingLimits
from domain.files import ProcessingStatus
from tests.fakes import FakeEmbedderRegistry, FakeUnitOfWork, HashingEmbedder
from tests.fakes.chat import fake_meter
from tests.unit.test_processing_use_cases import run, setup

PASSAGES = ["# Holidays", "Thirty days.", "# Expenses", "Keep receipts."]
PENDING = {"pending_embedding_model": "openai:m", "pending_embedding_dimensions": 8}


@pytest.fixture
def chunks():
    from tests.fakes import FakeChunks

    return FakeChunks()


async def staged(world, caller, chunks, **kwargs):
    """A file processed up to its staged parts of two passages each."""
    use_case, record = await setup(world, caller, chunks, part_size=2, **kwargs)
    assert await run(use_case, record) is ProcessingStatus.CHUNKING
    return use_case, record


def part_jobs(world):
    return [job for job in world.jobs.jobs if job.kind == EMBED_FILE_PART]


def embedder_of(world, chunks, embedder=None, max_runs=5):
    uow = FakeUnitOfWork(world.files, world.kbs, chunks, world.parts)
    return EmbedFilePart(
        world.files,
        world.kbs,
        chunks,
        world.parts,
        FakeEmbedderRegistry(embedder),
        uow,
        ProcessingLimits(max_runs=max_runs),
        fake_meter(),
    )


async def embed(use_case, job, last=False):
    return await use_case.execute(
        EmbedFilePartCommand(
            org_id=job.payload["orgId"],
            file_record_id=job.payload["fileRecordId"],
            part_id=job.payload["partId"],
            last_attempt=last,
        )
    )


def stored_texts(chunks, record, model="local:all-MiniLM-L6-v2"):
    return [item.chunk.text for item in chunks.stored.get((record.id, model), [])]


async def test_parts_are_queued_and_the_last_one_publishes_the_whole_file(world, caller, chunks):
    _, record = await staged(world, caller, chunks)
    jobs = part_jobs(world)
    assert len(jobs) == 2 and len({job.dedupe_key for job in jobs}) == 2
    # Parts are cut from the passages longest first (batches of like lengths pad little).
    staged_texts = [
        [c.text for c in world.parts.parts[job.payload["partId"]]["passages"]] for job in jobs
    ]
    assert staged_texts == [["Keep receipts.", "Thirty days."], ["# Holidays", "# Expenses"]]
    assert world.files.rows[record.id].processing_status is ProcessingStatus.CHUNKING
    use_case = embedder_of(world, chunks)
    # The second part first: order does not matter, and nothing is searchable before the end.
    assert await embed(use_case, jobs[1]) is None
    assert chunks.stored == {}
    assert world.files.rows[record.id].processing_status is ProcessingStatus.CHUNKING
    assert await embed(use_case, jobs[0]) is ProcessingStatus.COMPLETED
    assert stored_texts(chunks, record) == PASSAGES
    assert all(
        len(item.vector) == 384 for item in chunks.stored[(record.id, "local:all-MiniLM-L6-v2")]
    )
    assert world.parts.parts == {}
    # A part run again after the file was published finds nothing to do.
    assert await embed(use_case, jobs[0]) is None
    assert stored_texts(chunks, record) == PASSAGES


async def test_a_small_file_is_embedded_in_its_own_job(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks, part_size=4)
    assert await run(use_case, record) is ProcessingStatus.COMPLETED
    assert part_jobs(world) == [] and world.parts.parts == {}
    assert stored_texts(chunks, record) == PASSAGES


async def test_a_new_run_makes_the_parts_of_the_old_one_stale(world, caller, chunks):
    process, record = await staged(world, caller, chunks)
    old = part_jobs(world)
    world.jobs.jobs.clear()
    assert await run(process, record) is ProcessingStatus.CHUNKING
    new = part_jobs(world)
    assert {j.payload["partId"] for j in new}.isdisjoint({j.payload["partId"] for j in old})
    use_case = embedder_of(world, chunks)
    assert [await embed(use_case, job) for job in old] == [None, None]
    assert chunks.stored == {}
    assert await embed(use_case, new[0]) is None
    assert await embed(use_case, new[1]) is ProcessingStatus.COMPLETED
    assert stored_texts(chunks, record) == PASSAGES


async def test_a_part_that_cannot_be_embedded_fails_the_file_and_drops_the_rest(
    world, caller, chunks
):
    _, record = await staged(world, caller, chunks)
    first, second = part_jobs(world)
    failing = embedder_of(world, chunks, HashingEmbedder(failure=EmbeddingFailed("Too long.")))
    assert await embed(failing, first) is ProcessingStatus.CHUNK_FAILED
    failed = world.files.rows[record.id]
    assert (failed.processing_status, failed.processing_error) == (
        ProcessingStatus.CHUNK_FAILED,
        "Too long.",
    )
    assert world.parts.parts == {}
    assert await embed(embedder_of(world, chunks), second) is None
    assert chunks.stored == {}


async def test_unexpected_errors_are_retried_then_fail_the_file(world, caller, chunks):
    _, record = await staged(world, caller, chunks)
    first, _ = part_jobs(world)
    broken = embedder_of(world, chunks, HashingEmbedder(failure=ConnectionError("down")))
    with pytest.raises(ConnectionError):
        await embed(broken, first)
    assert world.files.rows[record.id].processing_status is ProcessingStatus.CHUNKING
    assert await embed(broken, first, last=True) is ProcessingStatus.CHUNK_FAILED
    assert "after several attempts" in world.files.rows[record.id].processing_error


async def test_a_part_that_keeps_killing_its_worker_fails_the_file(world, caller, chunks):
    _, record = await staged(world, caller, chunks)
    first, _ = part_jobs(world)
    world.parts.parts[first.payload["partId"]]["starts"] = 2
    assert await embed(embedder_of(world, chunks, max_runs=2), first) is (
        ProcessingStatus.CHUNK_FAILED
    )
    assert "interrupted too many times" in world.files.rows[record.id].processing_error


async def test_a_failure_of_a_stale_part_leaves_the_new_run_alone(world, caller, chunks):
    process, record = await staged(world, caller, chunks)
    (old, _) = part_jobs(world)
    world.jobs.jobs.clear()
    await run(process, record)
    failing = embedder_of(world, chunks, HashingEmbedder(failure=EmbeddingFailed("x")))
    assert await embed(failing, old) is None
    assert world.files.rows[record.id].processing_status is ProcessingStatus.CHUNKING
    assert len(world.parts.parts) == 2


async def test_the_last_part_stores_the_models_the_knowledge_base_has_then(world, caller, chunks):
    _, record = await staged(world, caller, chunks)
    kb_id = record.knowledge_base_id
    # Re-embedding asked for after the file was staged: the pending model is embedded too.
    await world.kbs.update(caller.org_id, kb_id, PENDING)
    use_case = embedder_of(world, chunks)
    for job in part_jobs(world):
        await embed(use_case, job)
    assert stored_texts(chunks, record, "openai:m") == PASSAGES
    assert stored_texts(chunks, record) == PASSAGES
    assert len(chunks.stored[(record.id, "openai:m")][0].vector) == 8


async def test_a_model_dropped_while_staged_is_not_published(world, caller, chunks):
    process, record = await setup(world, caller, chunks, part_size=2)
    await world.kbs.update(caller.org_id, record.knowledge_base_id, PENDING)
    assert await run(process, record) is ProcessingStatus.CHUNKING
    assert [m.model for m in world.parts.parts[1]["models"]] == [
        "local:all-MiniLM-L6-v2",
        "openai:m",
    ]
    # The re-embedding finished meanwhile: the knowledge base now has only the new model.
    await world.kbs.update(
        caller.org_id,
        record.knowledge_base_id,
        {
            "embedding_model": "openai:m",
            "embedding_dimensions": 8,
            "pending_embedding_model": None,
            "pending_embedding_dimensions": None,
        },
    )
    use_case = embedder_of(world, chunks)
    for job in part_jobs(world):
        await embed(use_case, job)
    assert {model for _, model in chunks.stored} == {"openai:m"}
    assert stored_texts(chunks, record, "openai:m") == PASSAGES


class ChangingEmbedder(HashingEmbedder):
    """Asks for a re-embedding of the knowledge base while it embeds the file."""

    def __init__(self, world, caller, kb_id):
        super().__init__()
        self.change = (world, caller, kb_id)

    async def embed(self, texts):
        world, caller, kb_id = self.change
        if world.kbs.rows[kb_id].pending_embedding_model is None:
            await world.kbs.update(caller.org_id, kb_id, PENDING)
        return await super().embed(texts)


async def test_a_small_file_also_stores_a_model_asked_for_while_it_ran(world, caller, chunks):
    embedder = ChangingEmbedder(world, caller, None)
    use_case, record = await setup(world, caller, chunks, embedder=embedder)
    embedder.change = (world, caller, record.knowledge_base_id)
    assert await run(use_case, record) is ProcessingStatus.COMPLETED
    assert stored_texts(chunks, record, "openai:m") == PASSAGES
    assert stored_texts(chunks, record) == PASSAGES


async def test_a_part_of_a_deleted_file_is_dropped(world, caller, chunks):
    _, record = await staged(world, caller, chunks)
    first, _ = part_jobs(world)
    await world.files.delete(caller.org_id, record.id)
    assert await embed(embedder_of(world, chunks), first) is None
    assert chunks.stored == {}
