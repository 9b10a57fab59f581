"""The `chat.title` job through the real worker, queue and Postgres adapters, with a scripted
chat model standing in for the deployment's default one."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

from dishka import Provider, Scope, provide
from sqlalchemy import text

from adapters.postgres.agents import PgAgentRepository
from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import org_connection
from adapters.queue.pgqueuer_queue import PgQueuerJobQueue
from adapters.queue.pgqueuer_worker import RetryPolicy, release_jobs
from application.ports.chat_model import ChatModelRegistry
from application.ports.job_queue import generate_title_job
from domain.agents import NewAgent
from domain.conversations import NewConversation, TitleSource
from entrypoints.worker.jobs import build_worker
from tests.fakes.chat import ScriptedChatModel, ScriptedChatRegistry, text_script


class ScriptedModels(Provider):
    def __init__(self, registry: ScriptedChatRegistry) -> None:
        super().__init__()
        self._registry = registry

    @provide(scope=Scope.APP)
    def models(self) -> ChatModelRegistry:
        return self._registry


async def start_conversation(app_pool, *, rename: bool = False) -> str:
    thread_id = str(uuid.uuid4())
    async with org_connection(app_pool, "org_a") as db:
        agent = await PgAgentRepository(db).add(
            NewAgent(
                org_id="org_a", user_id="user_1", name="Travel helper", description="",
                role="Plan trips.", model="local:smollm2-135m",
            )
        )  # fmt: skip
        conversations = PgConversationRepository(db)
        conversation = await conversations.add(
            NewConversation(
                thread_id=thread_id, org_id="org_a", user_id="user_1", agent_id=agent.id,
                title="Plan a week in Lisbon", title_source=TitleSource.FALLBACK,
                upstream_conversation_id=None,
            )
        )  # fmt: skip
        await conversations.add_message(
            "org_a",
            thread_id,
            message_id=str(uuid.uuid4()),
            role="user",
            parts=[{"type": "text", "text": "Plan a week in Lisbon for two in May"}],
        )
        await PgQueuerJobQueue(db).enqueue(
            generate_title_job("org_a", thread_id, conversation.title_version)
        )
        if rename:
            await conversations.rename("org_a", thread_id, None)
        await db.commit()
    return thread_id


async def title_of(owner_engine, thread_id: str) -> tuple[str | None, str]:
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT title, title_source FROM conversations WHERE thread_id = :t"),
                {"t": uuid.UUID(thread_id)},
            )
        ).one()
    return row[0], row[1]


async def test_the_worker_names_a_conversation_and_records_usage(
    settings, database, clean, app_pool, owner_engine
):
    model = ScriptedChatModel(text_script('"Lisbon week for two"', usage=(30, 4)))
    named = await start_conversation(app_pool)
    renamed = await start_conversation(app_pool, rename=True)
    worker, container = build_worker(
        settings,
        database,
        ScriptedModels(ScriptedChatRegistry(model)),
        concurrency=1,
        retry=RetryPolicy(max_attempts=2, initial_delay=timedelta(0)),
    )
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(200):
            if (await title_of(owner_engine, named))[1] == TitleSource.GENERATED.value:
                break
            await asyncio.sleep(0.05)
        async with owner_engine.connect() as connection:
            pending = await connection.scalar(text("SELECT count(*) FROM pgqueuer"))
        for _ in range(100):
            if not pending:
                break
            await asyncio.sleep(0.05)
            async with owner_engine.connect() as connection:
                pending = await connection.scalar(text("SELECT count(*) FROM pgqueuer"))
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
        await container.close()
    assert await title_of(owner_engine, named) == ("Lisbon week for two", "generated")
    assert await title_of(owner_engine, renamed) == (None, "renamed")
    assert len(model.requests) == 1
    async with owner_engine.connect() as connection:
        usage = (
            await connection.execute(
                text("SELECT purpose, model, input_tokens, output_tokens FROM usage_events")
            )
        ).all()
    assert [tuple(u) for u in usage] == [("title", "local:smollm2-135m", 30, 4)]


async def test_a_title_job_that_was_cut_short_is_given_up(
    settings, database, clean, app_pool, owner_engine
):
    """Its first run died with its worker (maybe killed by it): the next worker, handed the job
    at once by `release_jobs`, does not ask the model again and the fallback title stays."""
    model = ScriptedChatModel(text_script("Lisbon week for two"))
    thread_id = await start_conversation(app_pool)
    dead = uuid.uuid4()
    async with app_pool.acquire() as connection:
        job_id = await connection.fetchval(
            "UPDATE pgqueuer SET status = 'picked', queue_manager_id = $1 RETURNING id", dead
        )
        await connection.execute(
            "INSERT INTO pgqueuer_job_runs (job_id, started) VALUES ($1, 1)", job_id
        )
        assert await release_jobs(connection, dead) == 1
    rescuer = uuid.uuid4()
    worker, container = build_worker(
        settings,
        database,
        ScriptedModels(ScriptedChatRegistry(model)),
        concurrency=1,
        worker_id=rescuer,
    )
    assert worker.worker_id == rescuer
    task = asyncio.create_task(worker.run())
    try:
        for _ in range(200):  # 10 s, well within the 30 s heartbeat timeout
            async with owner_engine.connect() as connection:
                if not await connection.scalar(text("SELECT count(*) FROM pgqueuer_job_runs")):
                    break
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await asyncio.wait_for(task, 30)
        await container.close()
    assert model.requests == []
    assert await title_of(owner_engine, thread_id) == ("Plan a week in Lisbon", "fallback")
    async with owner_engine.connect() as connection:
        assert not await connection.scalar(text("SELECT count(*) FROM pgqueuer"))
