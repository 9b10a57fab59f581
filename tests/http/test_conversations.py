"""The conversation endpoints through the whole app: GET /getConversation, GET and DELETE
/conversations, PATCH /api/renameConversation. Conversations are arranged through the
repository on an organization-scoped connection, as `POST /chat` stores them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import text

from adapters.postgres.conversations import PgConversationRepository
from adapters.postgres.database import org_connection
from domain.conversations import NewConversation, TitleSource

THREAD_INVALID = {"error": "threadId must be a valid UUID"}
NOT_FOUND = {"error": "Conversation not found"}


@pytest.fixture
async def agent_of(owner_engine):
    async def make(org: str) -> int:
        async with owner_engine.begin() as connection:
            result = await connection.execute(
                text(
                    "INSERT INTO agents (org_id, user_id, name, model) "
                    "VALUES (:org, 'user_alice', 'Helper', 'local:smollm2-135m') RETURNING id"
                ),
                {"org": org},
            )
            return int(result.scalar_one())

    return make


@pytest.fixture
def conversation(app_pool, agent_of):
    """Store a conversation of `who` with a user message (and a running response if asked)."""

    async def make(
        who: Any, *, agent_id: int | None = None, title: str | None = "Holidays",
        running: bool = False, upstream: str | None = None,
    ) -> dict[str, Any]:  # fmt: skip
        agent = agent_id if agent_id is not None else await agent_of(who.org)
        thread = str(uuid.uuid4())
        async with org_connection(app_pool, who.org) as db:
            repo = PgConversationRepository(db)
            await repo.add(
                NewConversation(
                    thread_id=thread, org_id=who.org, user_id=who.user, agent_id=agent,
                    title=title, title_source=TitleSource.FALLBACK,
                    upstream_conversation_id=upstream,
                )
            )  # fmt: skip
            question = await repo.add_message(
                who.org, thread, message_id=str(uuid.uuid4()), role="user",
                parts=[{"type": "text", "text": "How many days off?"}],
            )  # fmt: skip
            run = None
            if running:
                run = await repo.start_run(
                    who.org, thread, run_id=str(uuid.uuid4()), message_id=str(uuid.uuid4())
                )
            await db.commit()
        return {"threadId": thread, "agentId": agent, "question": question, "run": run}

    return make


@pytest.fixture
def carol(member):
    """Alice's colleague in org_a, a plain member."""
    return member("org_a", "user_carol")


async def get_conversation(client, who, thread_id):
    return await client.get("/getConversation", params={"threadId": thread_id}, headers=who.headers)


# GET /getConversation


async def test_get_conversation_returns_the_contract_shape(client, carol, conversation):
    upstream = str(uuid.uuid4())
    made = await conversation(carol, running=True, upstream=upstream)
    response = await get_conversation(client, carol, made["threadId"].upper())
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {
        "threadId", "agentId", "title", "streamStatus", "upstreamConversationId", "messages",
        "createdAt", "updatedAt",
    }  # fmt: skip
    assert body["threadId"] == made["threadId"]
    assert body["agentId"] == made["agentId"]
    assert body["title"] == "Holidays"
    assert body["streamStatus"] == "in_progress"
    assert body["upstreamConversationId"] == upstream
    question, answer = body["messages"]
    assert set(question) == {"id", "role", "parts", "createdAt"}
    assert question["id"] == made["question"].id
    assert (question["role"], question["parts"]) == (
        "user",
        [{"type": "text", "text": "How many days off?"}],
    )
    assert (answer["id"], answer["role"], answer["parts"]) == (
        made["run"].message_id,
        "assistant",
        [],
    )
    assert response.headers["X-Request-ID"]


async def test_a_conversation_without_a_response_has_no_stream_status(client, carol, conversation):
    made = await conversation(carol, title=None)
    body = (await get_conversation(client, carol, made["threadId"])).json()
    assert (body["streamStatus"], body["title"], body["upstreamConversationId"]) == (
        None,
        None,
        None,
    )


async def test_an_admin_reads_a_members_conversation_others_get_404(
    client, alice, carol, bob, member, conversation
):
    made = await conversation(carol)
    assert (await get_conversation(client, alice, made["threadId"])).status_code == 200
    dave = member("org_a", "user_dave")
    for who in (dave, bob):
        response = await get_conversation(client, who, made["threadId"])
        assert (response.status_code, response.json()) == (404, NOT_FOUND)


@pytest.mark.parametrize("params", [{}, {"threadId": ""}, {"threadId": "abc"}, {"threadId": "1"}])
async def test_get_conversation_with_a_malformed_thread_id_is_400(client, carol, params):
    response = await client.get("/getConversation", params=params, headers=carol.headers)
    assert (response.status_code, response.json()) == (400, THREAD_INVALID)


async def test_get_conversation_of_an_unknown_thread_is_404(client, carol):
    response = await get_conversation(client, carol, str(uuid.uuid4()))
    assert (response.status_code, response.json()) == (404, NOT_FOUND)


async def test_the_conversation_endpoints_need_a_token_and_an_organization(client, idp):
    thread = str(uuid.uuid4())
    calls = [
        ("GET", "/getConversation", {"threadId": thread}, None),
        ("GET", "/conversations", {}, None),
        ("DELETE", "/conversations", {"threadId": thread}, None),
        ("PATCH", "/api/renameConversation", {}, {"threadId": thread, "name": "x"}),
    ]
    no_org = {"Authorization": f"Bearer {idp.issue(user_id='user_1', org_id=None)}"}
    for method, path, params, body in calls:
        anonymous = await client.request(method, path, params=params, json=body)
        assert (anonymous.status_code, anonymous.json()) == (401, {"error": "Unauthorized"})
        orphan = await client.request(method, path, params=params, json=body, headers=no_org)
        assert (orphan.status_code, orphan.json()) == (
            403,
            {"error": "User is not part of any organization"},
        )


# GET /conversations


async def test_list_pages_newest_first_with_a_cursor(client, carol, alice, conversation):
    made = [await conversation(carol) for _ in range(5)]
    await conversation(alice)
    seen, cursor = [], None
    while True:
        params = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        response = await client.get("/conversations", params=params, headers=carol.headers)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["success"] is True
        for item in body["conversations"]:
            assert set(item) == {
                "threadId", "agentId", "title", "streamStatus", "upstreamConversationId",
                "createdAt", "updatedAt",
            }  # fmt: skip
        seen.extend(c["threadId"] for c in body["conversations"])
        cursor = body["nextCursor"]
        if cursor is None:
            break
    assert seen == [m["threadId"] for m in reversed(made)]


async def test_list_filters_by_agent(client, carol, agent_of, conversation):
    first, second = await agent_of("org_a"), await agent_of("org_a")
    with_first = await conversation(carol, agent_id=first)
    await conversation(carol, agent_id=second)
    response = await client.get(
        "/conversations", params={"agentId": str(first)}, headers=carol.headers
    )
    assert response.status_code == 200
    body = response.json()
    assert [c["threadId"] for c in body["conversations"]] == [with_first["threadId"]]
    assert body["nextCursor"] is None


async def test_an_empty_list(client, bob):
    response = await client.get("/conversations", headers=bob.headers)
    assert (response.status_code, response.json()) == (
        200,
        {"success": True, "conversations": [], "nextCursor": None},
    )


@pytest.mark.parametrize(
    ("params", "error"),
    [
        ({"limit": "0"}, "limit must be an integer from 1 to 100"),
        ({"limit": "500"}, "limit must be an integer from 1 to 100"),
        ({"limit": "many"}, "limit must be an integer from 1 to 100"),
        ({"agentId": "abc"}, "Valid agent ID is required"),
        ({"agentId": "-3"}, "Valid agent ID is required"),
        ({"cursor": "garbage!"}, "cursor is not valid"),
    ],
)
async def test_list_with_bad_parameters_is_400(client, carol, params, error):
    response = await client.get("/conversations", params=params, headers=carol.headers)
    assert response.status_code == 400
    assert response.json()["error"] == error


# DELETE /conversations


async def test_delete_removes_the_conversation(client, carol, conversation):
    made = await conversation(carol)
    kept = await conversation(carol)
    response = await client.delete(
        "/conversations", params={"threadId": made["threadId"]}, headers=carol.headers
    )
    assert (response.status_code, response.json()) == (
        200,
        {"success": True, "message": "Conversation deleted"},
    )
    assert (await get_conversation(client, carol, made["threadId"])).status_code == 404
    assert (await get_conversation(client, carol, kept["threadId"])).status_code == 200
    again = await client.delete(
        "/conversations", params={"threadId": made["threadId"]}, headers=carol.headers
    )
    assert (again.status_code, again.json()) == (404, NOT_FOUND)


async def test_delete_with_a_running_response_removes_its_run(
    client, carol, conversation, owner_engine
):
    made = await conversation(carol, running=True)
    response = await client.delete(
        "/conversations", params={"threadId": made["threadId"]}, headers=carol.headers
    )
    assert response.status_code == 200
    async with owner_engine.connect() as connection:
        left = (
            await connection.execute(
                text("SELECT count(*) FROM chat_runs WHERE id = :id"), {"id": made["run"].id}
            )
        ).scalar_one()
    assert left == 0


async def test_delete_by_others_is_404_and_by_an_admin_works(
    client, alice, carol, bob, member, conversation
):
    made = await conversation(carol)
    for who in (member("org_a", "user_dave"), bob):
        response = await client.delete(
            "/conversations", params={"threadId": made["threadId"]}, headers=who.headers
        )
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert (await get_conversation(client, carol, made["threadId"])).status_code == 200
    response = await client.delete(
        "/conversations", params={"threadId": made["threadId"]}, headers=alice.headers
    )
    assert response.status_code == 200


@pytest.mark.parametrize("params", [{}, {"threadId": "x"}])
async def test_delete_with_a_malformed_thread_id_is_400(client, carol, params):
    response = await client.delete("/conversations", params=params, headers=carol.headers)
    assert (response.status_code, response.json()) == (400, THREAD_INVALID)


# PATCH /api/renameConversation


async def rename(client, who, body):
    return await client.patch("/api/renameConversation", json=body, headers=who.headers)


async def test_rename_sets_and_clears_the_title(client, carol, conversation):
    made = await conversation(carol)
    thread = made["threadId"]
    response = await rename(client, carol, {"threadId": thread, "name": "  Leave policy "})
    assert (response.status_code, response.json()) == (
        200,
        {"success": True, "threadId": thread, "title": "Leave policy"},
    )
    assert (await get_conversation(client, carol, thread)).json()["title"] == "Leave policy"
    cleared = await rename(client, carol, {"threadId": thread.upper(), "name": ""})
    assert (cleared.status_code, cleared.json()) == (
        200,
        {"success": True, "threadId": thread, "title": None},
    )
    assert (await get_conversation(client, carol, thread)).json()["title"] is None


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("x" * 121, "name must be at most 120 characters"),
        ("line one\nline two", "name must be a single line"),
        ("tab\tinside", "name must not contain control characters"),
        ("   ", "name must not be empty"),
        (..., "name is required"),
    ],
)
async def test_rename_with_a_bad_name_is_400(client, carol, conversation, name, error):
    made = await conversation(carol)
    body: dict[str, Any] = {"threadId": made["threadId"]}
    if name is not ...:
        body["name"] = name
    response = await rename(client, carol, body)
    assert response.status_code == 400
    assert response.json()["error"] == error
    assert response.json()["details"][0]["field"] == "name"
    assert (await get_conversation(client, carol, made["threadId"])).json()["title"] == "Holidays"


async def test_rename_with_a_malformed_body_or_thread_id_is_400(client, carol):
    for body in ({"name": "x"}, {"threadId": "nope", "name": "x"}, {"threadId": 5, "name": "x"}):
        response = await rename(client, carol, body)
        assert (response.status_code, response.json()) == (400, THREAD_INVALID)
    wrong_type = await rename(client, carol, {"threadId": str(uuid.uuid4()), "name": 5})
    assert wrong_type.status_code == 400
    broken = await client.patch(
        "/api/renameConversation",
        content=b"{not json",
        headers={**carol.headers, "Content-Type": "application/json"},
    )
    assert broken.status_code == 400
    assert set(broken.json()) <= {"error", "details"}


async def test_rename_of_a_conversation_the_caller_cannot_see_is_404(
    client, carol, bob, member, conversation
):
    made = await conversation(carol)
    for who, thread in (
        (member("org_a", "user_dave"), made["threadId"]),
        (bob, made["threadId"]),
        (carol, str(uuid.uuid4())),
    ):
        response = await rename(client, who, {"threadId": thread, "name": "Mine"})
        assert (response.status_code, response.json()) == (404, NOT_FOUND)
    assert (await get_conversation(client, carol, made["threadId"])).json()["title"] == "Holidays"


async def test_the_openapi_document_lists_the_conversation_routes(client):
    paths = (await client.get("/schema/openapi.json")).json()["paths"]
    assert {"get"} <= set(paths["/getConversation"])
    assert {"get", "delete"} <= set(paths["/conversations"])
    assert {"patch"} <= set(paths["/api/renameConversation"])
