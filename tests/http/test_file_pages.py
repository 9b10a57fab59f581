"""`GET /kb/files` a page at a time (CONTRACT.md: optional `limit` 1-1000 and `cursor`,
keyset, newest first, `nextCursor` null on the last page; without `limit`, every file)."""

from __future__ import annotations

from typing import Any

from tests.http.helpers import add_file, make_kb


async def listing(client, who, kb_id: int, **params: Any) -> Any:
    return await client.get("/kb/files", params={"kbId": kb_id, **params}, headers=who.headers)


async def test_pages_walk_every_file_newest_first_once(client, alice):
    kb = await make_kb(client, alice)
    added = [(await add_file(client, alice, kb["id"]))["fileId"] for _ in range(7)]
    everything = (await listing(client, alice, kb["id"])).json()
    assert "nextCursor" not in everything
    newest_first = [f["fileId"] for f in everything["files"]]
    assert newest_first == added[::-1]

    seen: list[dict[str, Any]] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3}
        if cursor is not None:
            params["cursor"] = cursor
        response = await listing(client, alice, kb["id"], **params)
        assert response.status_code == 200, response.text
        page = response.json()
        assert page["success"] is True and "nextCursor" in page
        assert len(page["files"]) <= 3
        seen += page["files"]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    # The pages hold the whole listing's objects, field for field.
    assert seen == everything["files"] and pages == 3


async def test_a_page_boundary_holds_while_files_are_added(client, alice):
    kb = await make_kb(client, alice)
    older = [(await add_file(client, alice, kb["id"]))["fileId"] for _ in range(4)]
    first = (await listing(client, alice, kb["id"], limit=2)).json()
    assert [f["fileId"] for f in first["files"]] == older[:1:-1]
    await add_file(client, alice, kb["id"])
    second = (await listing(client, alice, kb["id"], limit=2, cursor=first["nextCursor"])).json()
    assert [f["fileId"] for f in second["files"]] == older[1::-1]
    assert second["nextCursor"] is None


async def test_a_last_page_that_is_full_says_so_and_an_empty_base_has_one_empty_page(client, alice):
    kb = await make_kb(client, alice)
    empty = (await listing(client, alice, kb["id"], limit=5)).json()
    assert empty == {"success": True, "files": [], "nextCursor": None}
    for _ in range(2):
        await add_file(client, alice, kb["id"])
    full = (await listing(client, alice, kb["id"], limit=2)).json()
    assert len(full["files"]) == 2 and full["nextCursor"] is None


async def test_bad_limits_and_cursors_are_400(client, alice):
    kb = await make_kb(client, alice)
    for limit in ("0", "1001", "-1", "ten", "1.5"):
        response = await listing(client, alice, kb["id"], limit=limit)
        assert response.status_code == 400, (limit, response.text)
    for cursor in ("not-a-cursor", "W10", "WyJ4IiwxXQ", "A" * 300):
        response = await listing(client, alice, kb["id"], limit=2, cursor=cursor)
        assert response.status_code == 400, (cursor, response.text)
        assert response.json()["error"] == "cursor is not valid"


async def test_another_organizations_cursor_shows_nothing_of_it(client, alice, bob):
    theirs = await make_kb(client, bob)
    for _ in range(3):
        await add_file(client, bob, theirs["id"])
    their_cursor = (await listing(client, bob, theirs["id"], limit=1)).json()["nextCursor"]
    mine = await make_kb(client, alice)
    await add_file(client, alice, mine["id"])
    page = (await listing(client, alice, mine["id"], limit=5, cursor=their_cursor)).json()
    assert all(f["knowledgeBaseId"] == mine["id"] for f in page["files"])
    assert (await listing(client, alice, theirs["id"], limit=1)).status_code == 404


async def test_the_page_parameters_are_documented(client):
    document = (await client.get("/schema/openapi.json")).json()
    parameters = {p["name"]: p for p in document["paths"]["/kb/files"]["get"]["parameters"]}
    assert parameters["limit"]["schema"]["maximum"] == 1000
    assert parameters["limit"]["schema"]["minimum"] == 1
    assert "cursor" in parameters
