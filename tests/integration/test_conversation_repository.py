"""PgConversationRepository against the real database, as the app role under row-level
security."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import org_connection
from domain.conversations import ConversationCursor, NewConversation, StreamStatus, TitleSource
from domain.errors import Conflict, NotFound

pytestmark = pytest.mark.usefixtures("clean")


async def make_agent(owner_engine, org="org_a", name="Helper") -> int:
    async with owner_engine.begin() as connection:
        result = await connection.execute(
            text(
                "INSERT INTO agents (org_id, user_id, name, model) "
                "VALUES (:org, 'u_admin', :name, 'local:smollm2-135m') RETURNING id"
            ),
            {"org": org, "name": name},
        )
        return int(result.scalar_one())


def new_conversation(agent_id, org="org_a", user="user_1", **overrides):
    values = {
        "thread_id": str(uuid.uuid4()),
        "org_id": org,
        "user_id": user,
        "agent_id": agent_id,
        "title": "Holidays",
        "title_source": TitleSource.FALLBACK,
        "upstream_conversation_id": None,
    }
    values.update(overrides)
    return NewConversation(**values)


async def add(app_pool, new):
    async with org_connection(app_pool, new.org_id) as db:
        conversation = await PgConversationRepository(db).add(new)
        await db.commit()
    return conversation


async def test_add_and_get_round_trip_with_canonical_ids(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    upstream = uuid.uuid4()
    thread = uuid.uuid4()
    new = new_conversation(
        agent, thread_id=str(thread).upper(), upstream_conversation_id=str(upstream).upper()
    )
    created = await add(app_pool, new)
    assert created.thread_id == str(thread)
    assert created.upstream_conversation_id == str(upstream)
    assert (created.agent_id, created.title, created.title_source) == (
        agent,
        "Holidays",
        TitleSource.FALLBACK,
    )
    assert (created.title_version, created.stream_status) == (0, None)
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        assert await repo.get("org_a", str(thread)) == created
        locked = await repo.get("org_a", str(thread), for_update=True)
        assert db.in_transaction
        assert locked == created
        assert await repo.get("org_b", str(thread)) is None
        assert await repo.get("org_a", str(uuid.uuid4())) is None


async def test_a_thread_id_already_taken_is_a_conflict(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    new = new_conversation(agent)
    await add(app_pool, new)
    with pytest.raises(Conflict):
        await add(app_pool, new)
    # Taken in another organization too: thread ids are global.
    other_agent = await make_agent(owner_engine, org="org_b")
    with pytest.raises(Conflict):
        await add(app_pool, new_conversation(other_agent, org="org_b", thread_id=new.thread_id))


async def test_messages_keep_their_order_and_parts_and_move_the_activity_time(
    app_pool, owner_engine
):
    agent = await make_agent(owner_engine)
    created = await add(app_pool, new_conversation(agent))
    thread = created.thread_id
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    parts = [
        {"type": "text", "text": "Über alles ✓"},
        {"type": "file", "mediaType": "application/pdf", "url": "https://x/a.pdf"},
    ]
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        stored = await repo.add_message(
            "org_a", thread, message_id=first.upper(), role="user", parts=parts
        )
        await repo.add_message(
            "org_a",
            thread,
            message_id=second,
            role="assistant",
            parts=[{"type": "text", "text": "ok"}],
        )
        await db.commit()
        messages = await repo.messages("org_a", thread)
        first_user = await repo.first_user_message("org_a", thread)
        after = await repo.get("org_a", thread)
    assert stored.id == first and stored.thread_id == thread and stored.parts == parts
    assert [(m.id, m.role) for m in messages] == [(first, "user"), (second, "assistant")]
    assert messages[0].parts == parts
    assert first_user == stored
    assert after is not None and after.updated_at > created.updated_at


async def test_writes_to_a_missing_or_foreign_thread_are_not_found(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    created = await add(app_pool, new_conversation(agent))
    async with org_connection(app_pool, "org_b") as db:
        repo = PgConversationRepository(db)
        with pytest.raises(NotFound):
            await repo.add_message(
                "org_b", created.thread_id, message_id=str(uuid.uuid4()), role="user", parts=[]
            )
        with pytest.raises(NotFound):
            await repo.start_run(
                "org_b", created.thread_id, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
            )
        assert await repo.first_user_message("org_b", created.thread_id) is None
        assert await repo.messages("org_b", created.thread_id) == []
        assert await repo.rename("org_b", created.thread_id, "Mine now") is None
        assert not await repo.set_generated_title("org_b", created.thread_id, "x", 0)
        assert not await repo.delete("org_b", created.thread_id)
        assert await repo.request_cancel("org_b", created.thread_id) is None
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        assert await PgConversationRepository(db).get("org_a", created.thread_id) == created


async def test_a_run_starts_with_an_empty_assistant_message_and_can_be_asked_to_stop(
    app_pool, owner_engine
):
    agent = await make_agent(owner_engine)
    created = await add(app_pool, new_conversation(agent))
    thread = created.thread_id
    run_id, message_id = str(uuid.uuid4()), str(uuid.uuid4())
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        assert await repo.running_run("org_a", thread) is None
        assert await repo.latest_run("org_a", thread) is None
        assert await repo.request_cancel("org_a", thread) is None
        run = await repo.start_run("org_a", thread, run_id=run_id, message_id=message_id)
        await db.commit()
        conversation = await repo.get("org_a", thread)
        messages = await repo.messages("org_a", thread)
        assert await repo.running_run("org_a", thread) == run
        assert await repo.latest_run("org_a", thread) == run
        cancelled = await repo.request_cancel("org_a", thread)
        await db.commit()
    assert (run.id, run.org_id, run.thread_id, run.message_id) == (
        run_id,
        "org_a",
        thread,
        message_id,
    )
    assert run.status is StreamStatus.IN_PROGRESS
    assert conversation is not None and conversation.stream_status is StreamStatus.IN_PROGRESS
    assert conversation.updated_at > created.updated_at
    assert [(m.id, m.role, m.parts) for m in messages] == [(message_id, "assistant", [])]
    assert cancelled == run
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT r.cancel_requested, m.status FROM chat_runs r "
                    "JOIN chat_messages m ON m.id = r.message_id WHERE r.id = :id"
                ),
                {"id": run_id},
            )
        ).one()
    assert tuple(row) == (True, "in_progress")


async def test_latest_run_is_the_newest_whatever_its_status(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    thread = (await add(app_pool, new_conversation(agent))).thread_id
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        old = await repo.start_run(
            "org_a", thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
        )
        await db.execute(
            "UPDATE chat_runs SET status = 'completed' WHERE id = $1", uuid.UUID(old.id)
        )
        new = await repo.start_run(
            "org_a", thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
        )
        await db.commit()
        assert await repo.latest_run("org_a", thread) == new
        assert await repo.running_run("org_a", thread) == new
        await db.execute("UPDATE chat_runs SET status = 'failed' WHERE id = $1", uuid.UUID(new.id))
        await db.commit()
        latest = await repo.latest_run("org_a", thread)
        assert await repo.running_run("org_a", thread) is None
    assert latest is not None and latest.id == new.id and latest.status is StreamStatus.FAILED


async def test_a_rename_wins_over_a_generated_title(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    created = await add(app_pool, new_conversation(agent))
    thread = created.thread_id
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        assert not await repo.set_generated_title("org_a", thread, "Stale", 7)
        assert await repo.set_generated_title("org_a", thread, "Holiday policy", 0)
        await db.commit()
        generated = await repo.get("org_a", thread)
        assert not await repo.set_generated_title("org_a", thread, "Again", 1)
        renamed = await repo.rename("org_a", thread, "Mine")
        cleared = await repo.rename("org_a", thread, None)
        await db.commit()
    assert generated is not None
    assert (generated.title, generated.title_source, generated.title_version) == (
        "Holiday policy",
        TitleSource.GENERATED,
        1,
    )
    assert renamed is not None and (renamed.title, renamed.title_source) == (
        "Mine",
        TitleSource.RENAMED,
    )
    assert cleared is not None
    assert (cleared.title, cleared.title_source, cleared.title_version) == (
        None,
        TitleSource.RENAMED,
        3,
    )
    # Titles do not count as activity: the list order stays put.
    assert cleared.updated_at == created.updated_at


async def test_a_generation_that_started_before_a_rename_loses(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    created = await add(app_pool, new_conversation(agent))
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        await repo.rename("org_a", created.thread_id, "Chosen")
        await db.commit()
        assert not await repo.set_generated_title(
            "org_a", created.thread_id, "Generated", created.title_version
        )
        after = await repo.get("org_a", created.thread_id)
    assert after is not None and after.title == "Chosen"


async def test_list_pages_through_a_members_conversations_newest_first(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    other_agent = await make_agent(owner_engine, name="Other")
    ids = []
    for i in range(5):
        created = await add(app_pool, new_conversation(other_agent if i == 2 else agent))
        ids.append(created.thread_id)
    # Two created in one transaction share `updated_at`: the thread id breaks the tie.
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        twins = [await repo.add(new_conversation(agent)) for _ in range(2)]
        await db.commit()
    assert twins[0].updated_at == twins[1].updated_at
    await add(app_pool, new_conversation(agent, user="user_2"))
    foreign_agent = await make_agent(owner_engine, org="org_b")
    await add(app_pool, new_conversation(foreign_agent, org="org_b", user="user_1"))

    expected = sorted((t.thread_id for t in twins), reverse=True) + ids[::-1]
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        seen, after = [], None
        while True:
            page = await repo.list_for_user("org_a", "user_1", agent_id=None, limit=3, after=after)
            seen.extend(c.thread_id for c in page)
            if len(page) < 3:
                break
            after = ConversationCursor(updated_at=page[-1].updated_at, thread_id=page[-1].thread_id)
        only_other = await repo.list_for_user(
            "org_a", "user_1", agent_id=other_agent, limit=10, after=None
        )
        none = await repo.list_for_user("org_a", "user_1", agent_id=999_999, limit=10, after=None)
        foreign = await repo.list_for_user("org_b", "user_1", agent_id=None, limit=10, after=None)
    assert seen == expected
    assert [c.thread_id for c in only_other] == [ids[2]]
    assert none == []
    assert foreign == []  # this connection is org_a's: row-level security hides org_b


async def test_list_uses_the_member_index(app_pool, owner_engine):
    async with owner_engine.connect() as connection:
        await connection.execute(text("SET enable_seqscan = off"))
        plan = (
            await connection.execute(
                text(
                    "EXPLAIN SELECT thread_id FROM conversations c WHERE c.org_id = 'o' "
                    "AND c.user_id = 'u' AND (c.updated_at, c.thread_id) < "
                    "(now(), gen_random_uuid()) ORDER BY c.updated_at DESC, c.thread_id DESC "
                    "LIMIT 5"
                )
            )
        ).all()
    text_plan = "\n".join(r[0] for r in plan)
    assert "ix_conversations_member" in text_plan
    assert "Sort" not in text_plan


async def test_delete_removes_messages_runs_and_chunks(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    thread = (await add(app_pool, new_conversation(agent))).thread_id
    kept = (await add(app_pool, new_conversation(agent))).thread_id
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        for where in (thread, kept):
            await repo.add_message(
                "org_a", where, message_id=str(uuid.uuid4()), role="user", parts=[]
            )
            run = await repo.start_run(
                "org_a", where, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
            )
            await db.execute(
                "INSERT INTO chat_run_chunks (run_id, seq, org_id, chunk) "
                "VALUES ($1, 0, 'org_a', '{\"type\": \"start\"}')",
                uuid.UUID(run.id),
            )
        await db.commit()
        assert await repo.delete("org_a", thread)
        await db.commit()
        assert not await repo.delete("org_a", thread)
        assert await repo.get("org_a", thread) is None
    async with owner_engine.connect() as connection:
        counts = (
            await connection.execute(
                text(
                    "SELECT (SELECT count(*) FROM chat_messages), (SELECT count(*) FROM chat_runs),"
                    " (SELECT count(*) FROM chat_run_chunks)"
                )
            )
        ).one()
    assert tuple(counts) == (2, 1, 1)


async def test_row_level_security_hides_other_organizations_chat_rows(app_pool, owner_engine):
    agent = await make_agent(owner_engine)
    thread = (await add(app_pool, new_conversation(agent))).thread_id
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        await repo.add_message("org_a", thread, message_id=str(uuid.uuid4()), role="user", parts=[])
        await repo.start_run(
            "org_a", thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
        )
        await db.commit()
    unfiltered = (
        "SELECT (SELECT count(*) FROM conversations), (SELECT count(*) FROM chat_messages), "
        "(SELECT count(*) FROM chat_runs)"
    )
    async with org_connection(app_pool, "org_b") as db:
        (row,) = await db.fetch(unfiltered)
        assert tuple(row) == (0, 0, 0)
        # A write that forgot its filter changes nothing of org_a's either.
        assert await db.execute("UPDATE conversations SET title = 'x'") == "UPDATE 0"
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        (row,) = await db.fetch(unfiltered)
    assert tuple(row) == (1, 2, 1)


async def test_start_writes_the_conversation_its_question_and_the_answer_at_once(
    app_pool, owner_engine
):
    agent = await make_agent(owner_engine)
    new = new_conversation(agent, title="Trip", title_source=TitleSource.SUPPLIED)
    question, answer, run_id = (str(uuid.uuid4()) for _ in range(3))
    parts = [{"type": "text", "text": "Where to?"}]
    async with org_connection(app_pool, "org_a") as db:
        sent = await PgConversationRepository(db).start(
            new, message_id=question, parts=parts, run_id=run_id, answer_id=answer
        )
        assert not db.in_transaction
    # Committed on its own: another connection sees everything.
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        conversation = await repo.get("org_a", new.thread_id)
        messages = await repo.messages("org_a", new.thread_id)
        run = await repo.running_run("org_a", new.thread_id)
    assert (sent.id, sent.role, sent.parts) == (question, "user", parts)
    assert conversation is not None
    assert (conversation.title, conversation.title_source) == ("Trip", TitleSource.SUPPLIED)
    assert conversation.stream_status is StreamStatus.IN_PROGRESS
    assert conversation.title_version == 0
    assert [(m.id, m.role, m.parts) for m in messages] == [
        (question, "user", parts),
        (answer, "assistant", []),
    ]
    assert run is not None and (run.id, run.message_id) == (run_id, answer)


async def test_start_joins_an_open_transaction_and_refuses_an_existing_thread(
    app_pool, owner_engine
):
    agent = await make_agent(owner_engine)
    new = new_conversation(agent)
    async with org_connection(app_pool, "org_a") as db:
        repo = PgConversationRepository(db)
        await db.begin()
        await repo.start(
            new, message_id=str(uuid.uuid4()), parts=[], run_id=str(uuid.uuid4()),
            answer_id=str(uuid.uuid4()),
        )  # fmt: skip
        await db.rollback()
        assert await repo.get("org_a", new.thread_id) is None
        await repo.start(
            new, message_id=str(uuid.uuid4()), parts=[], run_id=str(uuid.uuid4()),
            answer_id=str(uuid.uuid4()),
        )  # fmt: skip
        with pytest.raises(Conflict):
            await repo.start(
                new, message_id=str(uuid.uuid4()), parts=[], run_id=str(uuid.uuid4()),
                answer_id=str(uuid.uuid4()),
            )  # fmt: skip
        assert len(await repo.messages("org_a", new.thread_id)) == 2
