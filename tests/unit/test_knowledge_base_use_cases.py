from __future__ import annotations

import pytest

from application.ports.job_queue import REEMBED_KNOWLEDGE_BASE
from application.use_cases.create_knowledge_base import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
)
from application.use_cases.delete_knowledge_base import (
    DeleteKnowledgeBase,
    DeleteKnowledgeBaseCommand,
)
from application.use_cases.list_knowledge_bases import ListKnowledgeBases, ListKnowledgeBasesQuery
from application.use_cases.update_knowledge_base import (
    UpdateKnowledgeBase,
    UpdateKnowledgeBaseCommand,
)
from domain.errors import Invalid, NotFound
from domain.files import NewFile
from domain.identity import Caller
from domain.knowledge_bases import KnowledgeBaseStatus
from tests.fakes import FakeChunks, FakeClock
from tests.unit.conftest import World


async def create(world: World, caller: Caller, **fields: object) -> int:
    use_case = CreateKnowledgeBase(world.kbs, world.uow)
    summary = await use_case.execute(
        CreateKnowledgeBaseCommand.parse(caller=caller, **{"name": "Docs", **fields})  # type: ignore[arg-type]
    )
    return summary.knowledge_base.id


async def add_file(world: World, caller: Caller, kb_id: int, file_id: str) -> None:
    await world.files.add(
        NewFile(
            org_id=caller.org_id,
            knowledge_base_id=kb_id,
            file_id=file_id,
            file_name="a.pdf",
            file_key=f"orgs/{caller.org_id}/files/{file_id}/a.pdf",
            content_key=f"orgs/{caller.org_id}/files/{file_id}/content.md",
            content_type="application/pdf",
            file_size=10,
            user_metadata=None,
        )
    )


async def test_create_fills_in_the_default_model_and_its_dimensions(world, caller):
    kb_id = await create(world, caller, name="  Handbook  ", description=None)
    kb = world.kbs.rows[kb_id]
    assert (kb.name, kb.description, kb.user_id) == ("Handbook", "", "user_1")
    assert (kb.embedding_model, kb.embedding_dimensions) == ("local:all-MiniLM-L6-v2", 384)
    assert world.uow.commits == 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": ""}, "Name is required"),
        ({"name": None}, "Name is required"),
        ({"name": "x" * 201}, "Name must be at most 200 characters"),
        ({"embedding_model": "acme:model"}, "Unknown provider 'acme' in embeddingModel"),
        ({"embedding_model": "no-colon"}, "embeddingModel must have the form provider:model"),
        ({"embedding_model": "local:nope"}, "Unknown local embedding model 'nope'"),
        ({"embedding_dimensions": 768}, "produces 384-dimensional embeddings, not 768"),
        ({"embedding_model": "openai:custom"}, "embeddingDimensions is required"),
        ({"extraction_model": "acme:x"}, "Unknown provider 'acme' in extractionModel"),
        ({"extraction_model": "local:gpt-9"}, "Unknown local chat model 'gpt-9'"),
        ({"extraction_schema": {"type": "array"}}, "extractionSchema must describe an object"),
    ],
)
async def test_create_refuses_bad_fields_and_writes_nothing(world, caller, fields, message):
    with pytest.raises(Invalid) as error:
        await create(world, caller, **fields)
    assert message in error.value.message
    assert world.kbs.rows == {} and world.uow.commits == 0


async def test_create_accepts_an_unlisted_openai_model_with_dimensions(world, caller):
    kb_id = await create(world, caller, embedding_model="openai:bge-m3", embedding_dimensions=1024)
    assert world.kbs.rows[kb_id].embedding_dimensions == 1024


async def test_list_shows_only_the_callers_organization_newest_first(world, caller, stranger):
    first = await create(world, caller, name="One")
    second = await create(world, caller, name="Two")
    await create(world, stranger, name="Theirs")
    summaries = await ListKnowledgeBases(world.kbs).execute(ListKnowledgeBasesQuery(caller=caller))
    assert [s.knowledge_base.id for s in summaries] == [second, first]


async def test_list_computes_figures_and_status_from_files(world, caller):
    kb_id = await create(world, caller)
    await add_file(world, caller, kb_id, "00000000-0000-4000-8000-000000000001")
    await add_file(world, caller, kb_id, "00000000-0000-4000-8000-000000000002")
    (summary,) = await ListKnowledgeBases(world.kbs).execute(ListKnowledgeBasesQuery(caller=caller))
    assert (summary.file_count, summary.total_size) == (2, 20)
    assert summary.status is KnowledgeBaseStatus.PROCESSING
    assert summary.last_file_uploaded_at is not None


async def test_update_changes_only_the_fields_sent(world, caller):
    kb_id = await create(world, caller, description="keep me")
    use_case = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow)
    summary = await use_case.execute(
        UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=str(kb_id), name="Renamed")
    )
    kb = summary.knowledge_base
    assert (kb.name, kb.description) == ("Renamed", "keep me")


async def test_update_model_without_files_takes_effect_at_once(world, caller):
    kb_id = await create(world, caller)
    use_case = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow)
    summary = await use_case.execute(
        UpdateKnowledgeBaseCommand.parse(
            caller=caller, kb_id=kb_id, embedding_model="openai:text-embedding-3-small"
        )
    )
    assert summary.knowledge_base.embedding_dimensions == 1536
    assert summary.status is KnowledgeBaseStatus.READY
    assert world.jobs.jobs == []


async def test_update_model_with_files_queues_reembedding_and_keeps_the_old_index(world, caller):
    kb_id = await create(world, caller)
    await add_file(world, caller, kb_id, "00000000-0000-4000-8000-000000000001")
    use_case = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow)
    command = UpdateKnowledgeBaseCommand.parse(
        caller=caller, kb_id=kb_id, embedding_model="openai:text-embedding-3-small"
    )
    summary = await use_case.execute(command)
    await use_case.execute(command)
    kb = summary.knowledge_base
    assert kb.embedding_model == "local:all-MiniLM-L6-v2"
    assert kb.pending_embedding_model == "openai:text-embedding-3-small"
    assert summary.status is KnowledgeBaseStatus.REINDEXING
    assert [j.kind for j in world.jobs.jobs] == [REEMBED_KNOWLEDGE_BASE]


async def test_naming_the_model_in_use_forgets_a_failed_reembedding(world, caller):
    kb_id = await create(world, caller)
    await add_file(world, caller, kb_id, "00000000-0000-4000-8000-000000000001")
    await world.kbs.update("org_a", kb_id, {"reindex_error": "The provider refused the key."})
    use_case = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow)
    summary = await use_case.execute(
        UpdateKnowledgeBaseCommand.parse(
            caller=caller, kb_id=kb_id, embedding_model="local:all-MiniLM-L6-v2"
        )
    )
    assert summary.knowledge_base.reindex_error is None
    assert summary.status is KnowledgeBaseStatus.PROCESSING  # its file is still being processed
    assert all(j.kind != REEMBED_KNOWLEDGE_BASE for j in world.jobs.jobs)


async def test_update_of_a_foreign_or_missing_knowledge_base_is_not_found(world, caller, stranger):
    kb_id = await create(world, caller)
    use_case = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow)
    for who, target in ((stranger, kb_id), (caller, 999)):
        with pytest.raises(NotFound, match="Knowledge base not found"):
            await use_case.execute(
                UpdateKnowledgeBaseCommand.parse(caller=who, kb_id=target, name="x")
            )
    assert world.kbs.rows[kb_id].name == "Docs"


@pytest.mark.parametrize("kb_id", [None, "abc", 0, -3, 1.5, True, "", 2**63])
async def test_update_needs_a_valid_id(world, caller, kb_id):
    use_case = UpdateKnowledgeBase(world.kbs, FakeChunks(), world.jobs, world.uow)
    with pytest.raises(Invalid, match="Valid knowledge base ID is required"):
        await use_case.execute(
            UpdateKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id, name="x")
        )


async def test_delete_removes_rows_then_objects_and_reports_leftovers(world, caller):
    kb_id = await create(world, caller)
    kept, broken = "00000000-0000-4000-8000-000000000001", "00000000-0000-4000-8000-000000000002"
    for file_id in (kept, broken):
        await add_file(world, caller, kb_id, file_id)
        world.storage.objects[f"orgs/org_a/files/{file_id}/a.pdf"] = b"%PDF"
    world.storage.failing_prefixes.add(f"orgs/org_a/files/{broken}/")
    use_case = DeleteKnowledgeBase(
        world.kbs, world.files, world.storage, world.uow, world.uploads, world.jobs, FakeClock()
    )
    report = await use_case.execute(DeleteKnowledgeBaseCommand.parse(caller=caller, kb_id=kb_id))
    assert report.files_removed == 2
    assert report.leftover_prefixes == [f"orgs/org_a/files/{broken}/"]
    assert world.kbs.rows == {} and world.files.rows == {}
    assert list(world.storage.objects) == [f"orgs/org_a/files/{broken}/a.pdf"]


async def test_delete_of_a_foreign_knowledge_base_is_not_found(world, caller, stranger):
    kb_id = await create(world, caller)
    use_case = DeleteKnowledgeBase(
        world.kbs, world.files, world.storage, world.uow, world.uploads, world.jobs, FakeClock()
    )
    with pytest.raises(NotFound):
        await use_case.execute(DeleteKnowledgeBaseCommand.parse(caller=stranger, kb_id=kb_id))
    assert kb_id in world.kbs.rows
