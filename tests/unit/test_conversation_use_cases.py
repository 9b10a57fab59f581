"""GetConversation, ListConversations, DeleteConversation and RenameConversation with the fake
repository."""

from __future__ import annotations

import uuid

import pytest

from application.use_cases.delete_conversation import (
    DeleteConversation,
    DeleteConversationCommand,
)
from application.use_cases.get_conversation import GetConversation, GetConversationQuery
from application.use_cases.list_conversations import ListConversations, ListConversationsQuery
from application.use_cases.rename_conversation import (
    RenameConversation,
    RenameConversationCommand,
)
from domain.conversations import NewConversation, StreamStatus, TitleSource
from domain.errors import Invalid, NotFound
from domain.identity import ADMIN_ROLE, Caller
from domain.values import UNSET
from tests.fakes import FakeUnitOfWork
from tests.fakes.conversations import FakeConversations

OWNER = Caller(user_id="user_1", org_id="org_a")
COLLEAGUE = Caller(user_id="user_2", org_id="org_a")
ADMIN = Caller(user_id="user_admin", org_id="org_a", role=ADMIN_ROLE)
OUTSIDER = Caller(user_id="user_1", org_id="org_b", role=ADMIN_ROLE)


@pytest.fixture
def repo() -> FakeConversations:
    return FakeConversations()


@pytest.fixture
def uow(repo) -> FakeUnitOfWork:
    return FakeUnitOfWork(repo)


async def started(repo, caller=OWNER, agent_id=1, title="Holidays", source=TitleSource.FALLBACK):
    return await repo.add(
        NewConversation(
            thread_id=str(uuid.uuid4()),
            org_id=caller.org_id,
            user_id=caller.user_id,
            agent_id=agent_id,
            title=title,
            title_source=source,
            upstream_conversation_id=None,
        )
    )


# GetConversation


async def test_get_returns_the_conversation_with_its_messages_oldest_first(repo):
    conversation = await started(repo)
    thread = conversation.thread_id
    question = await repo.add_message(
        "org_a", thread, message_id=str(uuid.uuid4()), role="user",
        parts=[{"type": "text", "text": "How many days?"}],
    )  # fmt: skip
    run = await repo.start_run(
        "org_a", thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
    )
    found = await GetConversation(repo).execute(
        GetConversationQuery.parse(caller=OWNER, thread_id=thread.upper())
    )
    assert found.conversation.thread_id == thread
    assert found.conversation.stream_status is StreamStatus.IN_PROGRESS
    assert [(m.id, m.role, m.parts) for m in found.messages] == [
        (question.id, "user", [{"type": "text", "text": "How many days?"}]),
        (run.message_id, "assistant", []),
    ]


async def test_an_admin_reads_a_members_conversation_but_a_colleague_does_not(repo):
    thread = (await started(repo)).thread_id
    use_case = GetConversation(repo)
    found = await use_case.execute(GetConversationQuery.parse(caller=ADMIN, thread_id=thread))
    assert found.conversation.user_id == OWNER.user_id
    for caller in (COLLEAGUE, OUTSIDER):
        with pytest.raises(NotFound, match=r"^Conversation not found$"):
            await use_case.execute(GetConversationQuery.parse(caller=caller, thread_id=thread))


@pytest.mark.parametrize("thread_id", [None, "", "abc", 42, "1234-not-a-uuid"])
async def test_get_refuses_a_malformed_thread_id(repo, thread_id):
    with pytest.raises(Invalid, match=r"^threadId must be a valid UUID$"):
        await GetConversation(repo).execute(
            GetConversationQuery.parse(caller=OWNER, thread_id=thread_id)
        )


async def test_get_of_an_unknown_thread_is_not_found(repo):
    with pytest.raises(NotFound, match=r"^Conversation not found$"):
        await GetConversation(repo).execute(
            GetConversationQuery.parse(caller=OWNER, thread_id=str(uuid.uuid4()))
        )


# ListConversations


async def test_list_pages_through_the_callers_conversations_newest_first(repo):
    mine = [(await started(repo)).thread_id for _ in range(5)]
    await started(repo, caller=COLLEAGUE)
    await started(repo, caller=OUTSIDER)
    # Activity moves a conversation to the top.
    await repo.add_message("org_a", mine[0], message_id=str(uuid.uuid4()), role="user", parts=[])
    use_case = ListConversations(repo)
    seen, cursor, pages = [], None, 0
    while True:
        page = await use_case.execute(
            ListConversationsQuery.parse(caller=OWNER, limit="2", cursor=cursor)
        )
        pages += 1
        seen.extend(c.thread_id for c in page.conversations)
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == [mine[0], mine[4], mine[3], mine[2], mine[1]]
    assert pages == 3


async def test_a_full_last_page_has_no_next_cursor(repo):
    for _ in range(2):
        await started(repo)
    page = await ListConversations(repo).execute(
        ListConversationsQuery.parse(caller=OWNER, limit=2)
    )
    assert len(page.conversations) == 2
    assert page.next_cursor is None


async def test_list_filters_by_agent_and_defaults_to_twenty(repo):
    for i in range(23):
        await started(repo, agent_id=7 if i % 2 else 8)
    use_case = ListConversations(repo)
    everything = await use_case.execute(ListConversationsQuery.parse(caller=OWNER))
    assert len(everything.conversations) == 20 and everything.next_cursor
    sevens = await use_case.execute(
        ListConversationsQuery.parse(caller=OWNER, agent_id="7", limit=100)
    )
    assert len(sevens.conversations) == 11
    assert {c.agent_id for c in sevens.conversations} == {7}
    unknown = await use_case.execute(ListConversationsQuery.parse(caller=OWNER, agent_id=99))
    assert unknown.conversations == [] and unknown.next_cursor is None


async def test_an_admin_lists_only_their_own_conversations(repo):
    await started(repo)
    own = await started(repo, caller=ADMIN)
    page = await ListConversations(repo).execute(ListConversationsQuery.parse(caller=ADMIN))
    assert [c.thread_id for c in page.conversations] == [own.thread_id]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ({"agent_id": "abc"}, "Valid agent ID is required"),
        ({"agent_id": "0"}, "Valid agent ID is required"),
        ({"limit": "0"}, "limit must be an integer from 1 to 100"),
        ({"limit": "101"}, "limit must be an integer from 1 to 100"),
        ({"limit": "ten"}, "limit must be an integer from 1 to 100"),
        ({"cursor": "not-a-cursor"}, "cursor is not valid"),
        ({"cursor": "W10"}, "cursor is not valid"),
    ],
)
async def test_list_refuses_bad_parameters(repo, query, message):
    with pytest.raises(Invalid, match=f"^{message}$"):
        await ListConversations(repo).execute(ListConversationsQuery.parse(caller=OWNER, **query))


# DeleteConversation


async def test_delete_removes_the_conversation_and_commits(repo, uow):
    thread = (await started(repo)).thread_id
    kept = (await started(repo)).thread_id
    await repo.add_message("org_a", thread, message_id=str(uuid.uuid4()), role="user", parts=[])
    await DeleteConversation(repo, uow).execute(
        DeleteConversationCommand.parse(caller=OWNER, thread_id=thread)
    )
    assert uow.commits == 1
    assert await repo.get("org_a", thread) is None
    assert await repo.messages("org_a", thread) == []
    assert await repo.get("org_a", kept) is not None


async def test_delete_asks_a_running_response_to_stop_first(repo, uow):
    thread = (await started(repo)).thread_id
    run = await repo.start_run(
        "org_a", thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
    )
    await DeleteConversation(repo, uow).execute(
        DeleteConversationCommand.parse(caller=OWNER, thread_id=thread)
    )
    assert repo.cancel_requested == {run.id}
    assert repo.runs == {}


async def test_delete_by_an_admin_and_not_by_a_colleague(repo, uow):
    thread = (await started(repo)).thread_id
    use_case = DeleteConversation(repo, uow)
    for caller in (COLLEAGUE, OUTSIDER):
        with pytest.raises(NotFound, match=r"^Conversation not found$"):
            await use_case.execute(DeleteConversationCommand.parse(caller=caller, thread_id=thread))
    assert uow.commits == 0
    await use_case.execute(DeleteConversationCommand.parse(caller=ADMIN, thread_id=thread))
    assert await repo.get("org_a", thread) is None
    with pytest.raises(NotFound):
        await use_case.execute(DeleteConversationCommand.parse(caller=ADMIN, thread_id=thread))


async def test_delete_refuses_a_malformed_thread_id(repo, uow):
    with pytest.raises(Invalid, match=r"^threadId must be a valid UUID$"):
        await DeleteConversation(repo, uow).execute(
            DeleteConversationCommand.parse(caller=OWNER, thread_id="nope")
        )


# RenameConversation


async def test_rename_saves_the_trimmed_name_as_the_members_choice(repo, uow):
    conversation = await started(repo)
    renamed = await RenameConversation(repo, uow).execute(
        RenameConversationCommand.parse(
            caller=OWNER, thread_id=conversation.thread_id, name="  Leave policy  "
        )
    )
    assert (renamed.title, renamed.title_source, renamed.title_version) == (
        "Leave policy",
        TitleSource.RENAMED,
        1,
    )
    assert uow.commits == 1
    assert (await repo.get("org_a", conversation.thread_id)) == renamed


@pytest.mark.parametrize("name", ["", None])
async def test_an_empty_name_clears_the_title(repo, uow, name):
    conversation = await started(repo)
    renamed = await RenameConversation(repo, uow).execute(
        RenameConversationCommand.parse(caller=OWNER, thread_id=conversation.thread_id, name=name)
    )
    assert renamed.title is None
    assert renamed.title_source is TitleSource.RENAMED


async def test_a_rename_wins_over_a_title_generation_already_running(repo, uow):
    conversation = await started(repo)
    version_seen_by_generation = conversation.title_version
    await RenameConversation(repo, uow).execute(
        RenameConversationCommand.parse(caller=OWNER, thread_id=conversation.thread_id, name="")
    )
    assert not await repo.set_generated_title(
        "org_a", conversation.thread_id, "Generated", version_seen_by_generation
    )
    after = await repo.get("org_a", conversation.thread_id)
    assert after is not None and after.title is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (UNSET, "name is required"),
        ("x" * 121, "name must be at most 120 characters"),
        ("   ", "name must not be empty"),
        ("two\nlines", "name must be a single line"),
        ("bell\x07", "name must not contain control characters"),
        (12, "name must be a string"),
    ],
)
async def test_rename_refuses_a_bad_name(repo, uow, name, message):
    conversation = await started(repo)
    with pytest.raises(Invalid, match=f"^{message}$") as raised:
        await RenameConversation(repo, uow).execute(
            RenameConversationCommand.parse(
                caller=OWNER, thread_id=conversation.thread_id, name=name
            )
        )
    assert raised.value.details[0]["field"] == "name"
    assert uow.commits == 0
    assert await repo.get("org_a", conversation.thread_id) == conversation


async def test_a_name_of_exactly_120_characters_is_kept(repo, uow):
    conversation = await started(repo)
    renamed = await RenameConversation(repo, uow).execute(
        RenameConversationCommand.parse(
            caller=OWNER, thread_id=conversation.thread_id, name="y" * 120
        )
    )
    assert renamed.title == "y" * 120


async def test_rename_of_a_thread_the_caller_cannot_see_is_not_found(repo, uow):
    thread = (await started(repo)).thread_id
    use_case = RenameConversation(repo, uow)
    for caller, thread_id in ((COLLEAGUE, thread), (OUTSIDER, thread), (OWNER, str(uuid.uuid4()))):
        with pytest.raises(NotFound, match=r"^Conversation not found$"):
            await use_case.execute(
                RenameConversationCommand.parse(caller=caller, thread_id=thread_id, name="Mine")
            )
    renamed = await use_case.execute(
        RenameConversationCommand.parse(caller=ADMIN, thread_id=thread, name="Moderated")
    )
    assert renamed.title == "Moderated"
    with pytest.raises(Invalid, match=r"^threadId must be a valid UUID$"):
        await use_case.execute(
            RenameConversationCommand.parse(caller=OWNER, thread_id=None, name="x")
        )
