"""Hostile and malformed input at the HTTP edge: always a 4xx in the contract's error shape,
never a 500, and nothing stored."""

from __future__ import annotations

import json

import anyio
import pytest
from sqlalchemy import text

from tests.http.helpers import association, make_kb, presign

KB_ID_REQUIRED = {"error": "Valid knowledge base ID is required"}
HUGE = "9" * 5000


def deep(levels: int) -> bytes:
    return b'{"name": "x", "extractionSchema": ' + b'{"a": ' * levels + b"1" + b"}" * levels + b"}"


def assert_error_shape(response) -> dict:
    body = response.json()
    assert set(body) <= {"error", "details"} and isinstance(body["error"], str)
    return body


@pytest.mark.parametrize("levels", [990, 5000, 100_000])
async def test_deeply_nested_json_is_400(client, alice, owner_engine, levels):
    response = await client.post(
        "/kb/manage",
        content=deep(levels),
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400, response.text[:200]
    assert assert_error_shape(response)["error"] == "Malformed request body"
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_bases")) == 0


async def test_a_deeply_nested_array_body_is_400(client, alice):
    response = await client.post(
        "/agents",
        content=b"[" * 50_000 + b"]" * 50_000,
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert_error_shape(response)


@pytest.mark.parametrize("path", ["/kb/files", "/kb/manage"])
async def test_a_5000_digit_kb_id_in_the_query_is_400(client, alice, path):
    get = await client.get(f"/kb/files?kbId={HUGE}", headers=alice.headers)
    assert (get.status_code, get.json()) == (400, KB_ID_REQUIRED)
    delete = await client.delete(f"{path}?kbId={HUGE}", headers=alice.headers)
    assert (delete.status_code, delete.json()) == (400, KB_ID_REQUIRED)


async def test_a_5000_digit_kb_id_in_a_body_is_400(client, alice):
    upload = await presign(client, alice)
    body = json.dumps(association(1, upload)).replace('"kbId": 1', f'"kbId": {HUGE}')
    for path, method, content in (
        ("/kb/files", "POST", body),
        ("/kb/manage", "PATCH", f'{{"kbId": {HUGE}, "name": "x"}}'),
        ("/kb/search", "POST", f'{{"kbId": {HUGE}, "query": "x"}}'),
        ("/kb/search", "POST", f'{{"kbIds": [{HUGE}], "query": "x"}}'),
        ("/kb/files/reprocess", "POST", f'{{"kbId": {HUGE}, "fileId": "{upload["fileId"]}"}}'),
    ):
        response = await client.request(
            method,
            path,
            content=content.encode(),
            headers={**alice.headers, "Content-Type": "application/json"},
        )
        assert response.status_code == 400, (path, response.text[:200])
        assert response.json()["error"] == KB_ID_REQUIRED["error"], path


async def test_a_huge_number_anywhere_in_a_body_is_400(client, alice):
    kb = await make_kb(client, alice)
    upload = await presign(client, alice)
    body = association(kb["id"], upload, userMetadata={"n": 1})
    content = json.dumps(body).replace('"n": 1', f'"n": {HUGE}')
    response = await client.post(
        "/kb/files",
        content=content.encode(),
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert assert_error_shape(response)["error"] == "Invalid request body"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_json_without_a_json_content_type_is_415(client, alice, owner_engine, content_type):
    headers = dict(alice.headers)
    if content_type:
        headers["Content-Type"] = content_type
    response = await client.post("/kb/manage", content=b'{"name": "Docs"}', headers=headers)
    assert (response.status_code, response.json()) == (415, {"error": "Unsupported Media Type"})
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_bases")) == 0


async def test_json_media_types_with_parameters_are_accepted(client, alice):
    for content_type in ("application/json; charset=utf-8", "Application/JSON"):
        response = await client.post(
            "/kb/manage",
            content=b'{"name": "Docs"}',
            headers={**alice.headers, "Content-Type": content_type},
        )
        assert response.status_code == 201, (content_type, response.text)


async def test_415_needs_a_token_first(client):
    response = await client.post("/kb/manage", content=b'{"name": "Docs"}')
    assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})


@pytest.mark.parametrize(
    "query",
    ["?kbId=1e3", "?kbId=%201%20x", "?kbId=0x10", "?kbId=9223372036854775808", "?kbId=%E2%91%A0"],
)
async def test_query_ids_that_are_not_positive_64_bit_integers(client, alice, query):
    response = await client.get(f"/kb/files{query}", headers=alice.headers)
    assert (response.status_code, response.json()) == (400, KB_ID_REQUIRED)


async def test_a_huge_or_odd_thread_id_is_400(client, alice):
    for value in (HUGE, "x" * 10_000, "%00"):
        response = await client.get(f"/getConversation?threadId={value}", headers=alice.headers)
        assert response.status_code == 400
        assert response.json() == {"error": "threadId must be a valid UUID"}


async def test_bodies_that_are_not_objects_are_400(client, alice):
    for content in (b"[]", b"1", b'"x"', b"null", b"", b"\xff\xfe"):
        response = await client.post(
            "/kb/files",
            content=content,
            headers={**alice.headers, "Content-Type": "application/json"},
        )
        assert response.status_code == 400, content
        assert_error_shape(response)


@pytest.mark.parametrize(
    "form",
    [
        lambda u: u.replace("-", ""),
        lambda u: "{" + u + "}",
        lambda u: "urn:uuid:" + u,
        lambda u: f" {u}",
    ],
)
async def test_non_canonical_uuids_in_bodies_are_400(client, alice, owner_engine, form):
    kb = await make_kb(client, alice)
    upload = await presign(client, alice)
    odd = form(upload["fileId"])
    for path, body in (
        ("/kb/files", association(kb["id"], upload, fileId=odd)),
        ("/kb/files/reprocess", {"kbId": kb["id"], "fileId": odd}),
        ("/chat", {"agentId": 1, "threadId": odd, "messages": []}),
        ("/api/renameConversation", {"threadId": odd, "name": "x"}),
    ):
        method = "PATCH" if path.startswith("/api/") else "POST"
        response = await client.request(method, path, json=body, headers=alice.headers)
        assert response.status_code == 400, (path, odd, response.text[:200])
        assert_error_shape(response)
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_base_files")) == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"name": "\xff"}',
        b'{"name": "a\xc0\x80"}',
        b'{"name": "\xed\xa0\x80"}',
        b'{"name": 5, "description": "\xf4\x90\x80\x80"}',
    ],
)
async def test_a_body_that_is_not_utf8_is_400(client, alice, owner_engine, body):
    response = await client.post(
        "/kb/manage", content=body, headers={**alice.headers, "Content-Type": "application/json"}
    )
    assert response.status_code == 400, response.text
    assert assert_error_shape(response) == {
        "error": "Malformed request body",
        "details": [{"field": "body", "message": "not valid UTF-8"}],
    }
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_bases")) == 0


async def test_an_unpaired_surrogate_escape_is_named(client, alice):
    response = await client.post(
        "/kb/manage",
        content=b'{"name": "\\ud800"}',
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert response.json()["details"] == [
        {"field": "body", "message": "contains an unpaired surrogate escape"}
    ]


@pytest.mark.parametrize("query", ["kbId=01", "kbId=1&kbId=abc", "kbId=1&kbId=1", "kbId=+1"])
async def test_ids_are_canonical_and_given_once(client, alice, query):
    response = await client.get(f"/kb/files?{query}", headers=alice.headers)
    assert (response.status_code, response.json()) == (400, KB_ID_REQUIRED), query


@pytest.mark.parametrize(
    "headers",
    [
        {"Content-Type": "application/json; charset=utf-16"},
        {"Content-Type": "application/json; charset=latin-1"},
        {"Content-Type": "application/json", "Content-Encoding": "gzip"},
    ],
)
async def test_other_encodings_are_415(client, alice, headers):
    response = await client.post(
        "/kb/manage", content=b'{"name": "Docs"}', headers={**alice.headers, **headers}
    )
    assert (response.status_code, response.json()) == (415, {"error": "Unsupported Media Type"})
    utf8 = await client.post(
        "/kb/manage",
        content=b'{"name": "Docs"}',
        headers={**alice.headers, "Content-Type": 'application/json; charset="UTF-8"'},
    )
    assert utf8.status_code == 201


async def test_two_authorization_headers_are_401(client, alice, bob):
    response = await client.get(
        "/kb/manage",
        headers=[
            ("Authorization", alice.headers["Authorization"]),
            ("Authorization", bob.headers["Authorization"]),
        ],
    )
    assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})


@pytest.mark.parametrize("org", ["org_a ", " org_a", "org_a\n", ".", "..", "-x", "a/b"])
async def test_an_organization_id_is_taken_as_sent_or_refused(client, member, org):
    response = await client.get("/kb/manage", headers=member(org, "user_x").headers)
    assert (response.status_code, response.json()) == (401, {"error": "Unauthorized"})


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "file:///etc/passwd", "ftp://x/y", "no-scheme", "JAVASCRIPT:x"]
)
async def test_a_chat_file_part_takes_only_http_or_data_urls(client, alice, url):
    agent = await client.post("/agents", json={"name": "A"}, headers=alice.headers)
    part = {"type": "file", "url": url, "mediaType": "text/plain"}
    response = await client.post(
        "/chat",
        json={
            "agentId": agent.json()["agent"]["id"],
            "messages": [{"role": "user", "parts": [part]}],
        },
        headers={**alice.headers, "X-Stream-Response": "false"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == "A file part's url must be an http(s) or data: URL"


async def test_a_search_whose_embedding_model_is_not_configured_is_503(client, alice):
    created = await client.post(
        "/kb/manage",
        json={"name": "Remote", "embeddingModel": "openai:text-embedding-3-small"},
        headers=alice.headers,
    )
    assert created.status_code == 201, created.text
    kb_id = created.json()["knowledgeBase"]["id"]
    response = await client.post(
        "/kb/search", json={"kbId": kb_id, "query": "hello"}, headers=alice.headers
    )
    assert response.status_code == 503, response.text
    assert response.json()["error"].startswith(
        "The knowledge base's embedding model is unavailable: "
    )


async def test_a_client_that_hangs_up_mid_body_is_no_server_error(client, alice):
    """A body cut short by the client is logged as 499, not as a 500 of the service."""
    app = client.ap_app
    incoming = [
        {"type": "http.request", "body": b'{"name": ', "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict] = []

    async def receive():
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    headers = [
        (b"authorization", alice.headers["Authorization"].encode()),
        (b"content-type", b"application/json"),
        (b"content-length", b"50"),
        (b"host", b"testserver"),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/kb/manage",
        "raw_path": b"/kb/manage",
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
        "state": {},
    }
    # In the test client's event loop, which holds the app's pool: the caller is checked (a
    # connection taken) before the body is read.
    await anyio.to_thread.run_sync(client.blocking_portal.call, app, scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 499
