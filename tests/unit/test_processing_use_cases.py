from __future__ import annotations

import dataclasses

import pytest

from application.ports.embedder import EmbeddingFailed
from application.ports.structured_extractor import StructuredExtractionFailed
from application.use_cases.associate_file import AssociateFile
from application.use_cases.process_file import ProcessFile, ProcessFileCommand, ProcessingLimits
from application.use_cases.reembed_knowledge_base import (
    INTERRUPTED,
    ReembedKnowledgeBase,
    ReembedKnowledgeBaseCommand,
)
from domain.extraction import ExtractionFailed
from domain.files import ProcessingStatus
from tests.fakes import (
    FakeChunker,
    FakeChunks,
    FakeEmbedderRegistry,
    FakeEmbeddingParts,
    FakeExtractor,
    FakeUnitOfWork,
    HashingEmbedder,
)
from tests.fakes.chat import fake_meter
from tests.unit.test_file_use_cases import command
from tests.unit.test_knowledge_base_use_cases import create

TEXT = b"# Holidays\n\nThirty days.\n\n# Expenses\n\nKeep receipts."


class Extractor:
    def __init__(self, answer):
        self.answer = answer

    async def extract(self, *, model, schema, text, file_name, meter):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def chunks():
    return FakeChunks()


async def setup(
    world,
    caller,
    chunks,
    *,
    extractor=None,
    embedder=None,
    structured=None,
    max_runs=5,
    part_size=64,
    **kb_fields,
):
    kb_id = await create(world, caller, **kb_fields)
    upload = command(caller, kb_id=kb_id, file_size=len(TEXT))
    await world.storage.put(upload.file.file_key, TEXT, content_type=upload.file.content_type)
    world.uploads.issue(caller.org_id, upload.file.file_id, upload.file.file_key)
    record = await AssociateFile(
        world.kbs, world.files, world.uploads, world.jobs, world.uow, world.storage
    ).execute(upload)
    parts = world.parts = FakeEmbeddingParts(chunks)
    uow = FakeUnitOfWork(world.files, world.kbs, chunks, parts, world.jobs)
    use_case = ProcessFile(
        world.files,
        world.kbs,
        chunks,
        world.storage,
        extractor or FakeExtractor(),
        FakeChunker(),
        FakeEmbedderRegistry(embedder),
        structured or Extractor({}),
        parts,
        world.jobs,
        uow,
        ProcessingLimits(max_runs=max_runs, embedding_part_size=part_size),
        fake_meter(),
    )
    world.jobs.jobs.clear()
    return use_case, record


async def run(use_case, record, last=False):
    return await use_case.execute(
        ProcessFileCommand(org_id=record.org_id, file_record_id=record.id, last_attempt=last)
    )


async def test_states_text_images_and_passages(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks)
    assert await run(use_case, record) is ProcessingStatus.COMPLETED
    assert world.files.history == [
        ProcessingStatus.PARSED,
        ProcessingStatus.CHUNKING,
        ProcessingStatus.COMPLETED,
    ]
    assert world.storage.objects[record.content_key] == TEXT
    folder = record.file_key.rsplit("/", 1)[0]
    assert world.files.rows[record.id].image_keys == [f"{folder}/images/page-0001.png"]
    (stored,) = chunks.stored.values()
    assert [item.chunk.text for item in stored] == [
        "# Holidays",
        "Thirty days.",
        "# Expenses",
        "Keep receipts.",
    ]
    assert len(stored[0].vector) == 384


async def test_running_twice_leaves_one_set(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks)
    await run(use_case, record)
    world.files.rows[record.id] = dataclasses.replace(
        world.files.rows[record.id], processing_status=ProcessingStatus.CHUNKING
    )
    await run(use_case, record)
    assert len(chunks.stored) == 1 and len(next(iter(chunks.stored.values()))) == 4


async def test_finished_or_deleted_files_are_left_alone(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks)
    await run(use_case, record)
    assert await run(use_case, record) is None
    del world.files.rows[record.id]
    assert await run(use_case, record) is None


@pytest.mark.parametrize(
    ("kwargs", "status", "message"),
    [
        (
            {"extractor": FakeExtractor(ExtractionFailed("The file is empty."))},
            ProcessingStatus.PARSE_FAILED,
            "The file is empty.",
        ),
        (
            {"embedder": HashingEmbedder(failure=EmbeddingFailed("Model gone."))},
            ProcessingStatus.CHUNK_FAILED,
            "Model gone.",
        ),
        (
            {
                "structured": Extractor(StructuredExtractionFailed("Not JSON.")),
                "extraction_model": "openai:m",
                "extraction_schema": {"type": "object"},
            },
            ProcessingStatus.EXTRACT_FAILED,
            "Not JSON.",
        ),
    ],
)
async def test_named_failures(world, caller, chunks, kwargs, status, message):
    use_case, record = await setup(world, caller, chunks, **kwargs)
    assert await run(use_case, record) is status
    failed = world.files.rows[record.id]
    assert (failed.processing_status, failed.processing_error) == (status, message)
    assert chunks.stored == {}


async def test_unexpected_errors_are_retried_until_the_last_attempt(world, caller, chunks):
    embedder = HashingEmbedder(failure=ConnectionError("down"))
    use_case, record = await setup(world, caller, chunks, embedder=embedder)
    with pytest.raises(ConnectionError):
        await run(use_case, record)
    assert await run(use_case, record, last=True) is ProcessingStatus.CHUNK_FAILED
    assert "after several attempts" in world.files.rows[record.id].processing_error


async def test_a_file_that_keeps_killing_its_worker_is_stopped(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks, max_runs=2)
    world.files.runs = {record.id: 2}
    assert await run(use_case, record) is ProcessingStatus.PARSE_FAILED
    assert "interrupted too many times" in world.files.rows[record.id].processing_error


async def test_structured_data_is_stored(world, caller, chunks):
    use_case, record = await setup(
        world,
        caller,
        chunks,
        structured=Extractor({"days": 30}),
        extraction_model="openai:m",
        extraction_schema={"type": "object"},
    )
    await run(use_case, record)
    assert world.files.rows[record.id].extracted_data == {"days": 30}


async def test_reembedding_swaps_models_and_keeps_the_old_index_on_failure(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks)
    await run(use_case, record)
    kb_id = record.knowledge_base_id
    await world.kbs.update(
        caller.org_id,
        kb_id,
        {
            "pending_embedding_model": "openai:text-embedding-3-small",
            "pending_embedding_dimensions": 1536,
        },
    )
    uow = FakeUnitOfWork(world.files, world.kbs, chunks)
    reembed = ReembedKnowledgeBase(
        world.kbs, world.files, chunks, FakeEmbedderRegistry(), uow, fake_meter()
    )
    assert await reembed.execute(ReembedKnowledgeBaseCommand(org_id=caller.org_id, kb_id=kb_id))
    kb = world.kbs.rows[kb_id]
    assert (kb.embedding_model, kb.pending_embedding_model) == (
        "openai:text-embedding-3-small",
        None,
    )
    assert {model for _, model in chunks.stored} == {"openai:text-embedding-3-small"}

    await world.kbs.update(
        caller.org_id,
        kb_id,
        {
            "pending_embedding_model": "openai:text-embedding-3-large",
            "pending_embedding_dimensions": 3072,
        },
    )
    failing = FakeEmbedderRegistry(HashingEmbedder(failure=EmbeddingFailed("No such model.")))
    # A fresh unit of work: the change of model above was committed by its own request.
    uow = FakeUnitOfWork(world.files, world.kbs, chunks)
    reembed = ReembedKnowledgeBase(world.kbs, world.files, chunks, failing, uow, fake_meter())
    assert not await reembed.execute(ReembedKnowledgeBaseCommand(org_id=caller.org_id, kb_id=kb_id))
    kb = world.kbs.rows[kb_id]
    assert (kb.embedding_model, kb.reindex_error) == (
        "openai:text-embedding-3-small",
        "No such model.",
    )
    assert {model for _, model in chunks.stored} == {"openai:text-embedding-3-small"}


async def test_giving_up_a_reembedding_abandons_it_as_a_failed_one(world, caller, chunks):
    use_case, record = await setup(world, caller, chunks)
    await run(use_case, record)
    kb_id = record.knowledge_base_id
    pending = {
        "pending_embedding_model": "openai:text-embedding-3-small",
        "pending_embedding_dimensions": 1536,
    }
    await world.kbs.update(caller.org_id, kb_id, pending)
    uow = FakeUnitOfWork(world.files, world.kbs, chunks)
    reembed = ReembedKnowledgeBase(
        world.kbs, world.files, chunks, FakeEmbedderRegistry(), uow, fake_meter()
    )
    await reembed.give_up(ReembedKnowledgeBaseCommand(org_id=caller.org_id, kb_id=kb_id))
    kb = world.kbs.rows[kb_id]
    assert (kb.embedding_model, kb.pending_embedding_model, kb.reindex_error) == (
        "local:all-MiniLM-L6-v2",
        None,
        INTERRUPTED,
    )
    assert {model for _, model in chunks.stored} == {"local:all-MiniLM-L6-v2"}


class RecordingChunks(FakeChunks):
    async def search(self, org_id, *, query, scopes, top_k, filters=None):
        self.searched = (org_id, query, scopes, top_k)
        return []


async def test_search_embeds_once_per_model_and_checks_every_knowledge_base(
    world, caller, stranger
):
    from application.use_cases.search_knowledge_base import (
        SearchKnowledgeBase,
        SearchKnowledgeBaseQuery,
    )
    from domain.errors import Invalid, NotFound

    first = await create(world, caller)
    second = await create(world, caller)
    other = await create(world, caller, embedding_model="openai:bge", embedding_dimensions=1024)
    foreign = await create(world, stranger)
    chunks = RecordingChunks()
    search = SearchKnowledgeBase(world.kbs, chunks, FakeEmbedderRegistry(), fake_meter())
    await search.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller, kb_ids=[first, str(second), other, first], query=" holidays "
        )
    )
    _, query, scopes, top_k = chunks.searched
    assert (query, top_k) == ("holidays", 8)
    assert sorted((s.embedding_model, s.dimensions, s.knowledge_base_ids) for s in scopes) == [
        ("local:all-MiniLM-L6-v2", 384, [first, second]),
        ("openai:bge", 1024, [other]),
    ]
    with pytest.raises(NotFound):
        await search.execute(
            SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=[foreign], query="x")
        )
    for kb_ids, text, top in (
        ([], "x", None),
        ([first], "", None),
        ([first], "x", 0),
        ([first], "x" * 2001, None),
        (["a"], "x", None),
    ):
        with pytest.raises(Invalid):
            await search.execute(
                SearchKnowledgeBaseQuery.parse(caller=caller, kb_ids=kb_ids, query=text, top_k=top)
            )


async def test_an_agents_search_leaves_out_knowledge_bases_gone_since(world, caller, stranger):
    from application.use_cases.search_knowledge_base import (
        SearchKnowledgeBase,
        SearchKnowledgeBaseQuery,
    )

    kept = await create(world, caller)
    foreign = await create(world, stranger)
    chunks = RecordingChunks()
    search = SearchKnowledgeBase(world.kbs, chunks, FakeEmbedderRegistry(), fake_meter())
    await search.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller, kb_ids=[kept, foreign, 999], query="leave", skip_missing=True
        )
    )
    _, _, scopes, _ = chunks.searched
    assert [s.knowledge_base_ids for s in scopes] == [[kept]]
    chunks.searched = None
    found = await search.execute(
        SearchKnowledgeBaseQuery.parse(
            caller=caller, kb_ids=[foreign], query="x", skip_missing=True
        )
    )
    assert found.results == [] and chunks.searched is None


async def test_reprocess_restarts_the_file_and_queues_it(world, caller, chunks):
    from application.use_cases.reprocess_file import ReprocessFile, ReprocessFileCommand

    use_case, record = await setup(
        world, caller, chunks, embedder=HashingEmbedder(failure=EmbeddingFailed("x"))
    )
    await run(use_case, record)
    world.jobs.jobs.clear()
    restarted = await ReprocessFile(world.kbs, world.files, world.jobs, world.uow).execute(
        ReprocessFileCommand.parse(
            caller=caller, kb_id=record.knowledge_base_id, file_id=record.file_id
        )
    )
    assert (restarted.processing_status, restarted.processing_error) == (
        ProcessingStatus.PARSING,
        None,
    )
    assert [j.payload["fileRecordId"] for j in world.jobs.jobs] == [record.id]
