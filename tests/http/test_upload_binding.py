"""Issue 12's hostile probe, over HTTP: keys bound to their file, uploads used once, the stored
object's real size and type checked at association, malformed signed parameters and hostile
file names refused without a 500."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from sqlalchemy import text

from tests.http.helpers import association, make_kb, presign, put_upload


def objects(settings):
    return settings.data_dir.resolve() / "objects"


async def uploaded(client, who, name="a.txt", data=b"hello world", size=None, ct="text/plain"):
    upload = await presign(client, who, name=name, content_type=ct, size=size or len(data))
    response = await put_upload(client, upload, data)
    assert response.status_code == 200, response.text
    return upload


def body(kb_id, upload, name="a.txt", ct="text/plain", size=11, **overrides):
    return association(kb_id, upload, fileName=name, contentType=ct, fileSize=size, **overrides)


async def test_a_content_key_of_another_file_is_refused(client, alice, settings):
    kb = await make_kb(client, alice)
    y = await uploaded(client, alice, name="y.txt", data=b"Y original!")
    assert (
        await client.post("/kb/files", json=body(kb["id"], y, "y.txt"), headers=alice.headers)
    ).status_code == 201
    x = await uploaded(client, alice)
    response = await client.post(
        "/kb/files", json=body(kb["id"], x, contentKey=y["fileKey"]), headers=alice.headers
    )
    assert response.status_code == 400
    assert (
        response.json()["error"] == "contentKey is not the key issued for this fileId and fileName"
    )
    assert [d["field"] for d in response.json()["details"]] == ["contentKey"]
    theirs = await client.post(
        "/kb/files", json=body(kb["id"], x, fileKey=y["fileKey"]), headers=alice.headers
    )
    assert theirs.status_code == 400 and theirs.json()["details"][0]["field"] == "fileKey"
    assert (objects(settings) / y["fileKey"]).read_bytes() == b"Y original!"


async def test_a_signed_put_is_used_once_before_and_after_association(client, alice, settings):
    kb = await make_kb(client, alice)
    upload = await uploaded(client, alice)
    replay = await put_upload(client, upload, b"hello WORLD")
    assert (replay.status_code, replay.json()) == (
        409,
        {"error": "This upload address has already been used"},
    )
    created = await client.post("/kb/files", json=body(kb["id"], upload), headers=alice.headers)
    assert created.status_code == 201, created.text
    after = await put_upload(client, upload, b"evil bytes!")
    assert after.status_code == 409
    assert (objects(settings) / upload["fileKey"]).read_bytes() == b"hello world"


async def test_a_signed_put_replayed_after_the_file_was_deleted_stores_nothing(
    client, alice, settings
):
    kb = await make_kb(client, alice)
    upload = await uploaded(client, alice)
    created = await client.post("/kb/files", json=body(kb["id"], upload), headers=alice.headers)
    assert created.status_code == 201, created.text
    deleted = await client.delete(
        f"/kb/files?kbId={kb['id']}&fileId={upload['fileId']}", headers=alice.headers
    )
    assert deleted.status_code == 200
    replay = await put_upload(client, upload, b"evil bytes!")
    assert (replay.status_code, replay.json()) == (
        409,
        {"error": "The file this upload was issued for has been deleted"},
    )
    assert not (objects(settings) / upload["fileKey"]).exists()
    again = await client.post("/kb/files", json=body(kb["id"], upload), headers=alice.headers)
    assert (again.status_code, again.json()["error"]) == (
        409,
        "The file this upload was issued for has been deleted",
    )


async def test_a_signed_put_replayed_after_its_knowledge_base_was_deleted_stores_nothing(
    client, alice, settings
):
    kb = await make_kb(client, alice)
    upload = await uploaded(client, alice)
    created = await client.post("/kb/files", json=body(kb["id"], upload), headers=alice.headers)
    assert created.status_code == 201, created.text
    assert (await client.delete(f"/kb/manage?kbId={kb['id']}", headers=alice.headers)).is_success
    replay = await put_upload(client, upload, b"evil bytes!")
    assert replay.status_code == 409
    assert not (objects(settings) / upload["fileKey"]).exists()


async def test_a_signed_put_for_an_upload_never_recorded_is_403(
    client, alice, settings, owner_engine
):
    upload = await presign(client, alice, name="a.txt", content_type="text/plain", size=11)
    # As an address signed before uploads were recorded (migration 0019) would be.
    async with owner_engine.begin() as connection:
        await connection.execute(text("DELETE FROM issued_uploads"))
    refused = await put_upload(client, upload, b"hello world")
    assert (refused.status_code, refused.json()) == (
        403,
        {"error": "This upload was not issued by POST /upload/presigned"},
    )
    assert not (objects(settings) / upload["fileKey"]).exists()


async def test_a_refused_upload_can_be_sent_again(client, alice):
    upload = await presign(client, alice, name="a.txt", content_type="text/plain", size=5)
    assert (await put_upload(client, upload, b"123456")).status_code == 413
    short = await put_upload(client, upload, b"1234")
    assert (short.status_code, short.json()["error"]) == (
        400,
        "The upload must be exactly 5 bytes, the size the address was signed for",
    )
    assert (await put_upload(client, upload, b"12345")).status_code == 200


@pytest.mark.parametrize(
    ("overrides", "field", "error"),
    [
        ({"size": 4000}, "fileSize", "fileSize does not match the uploaded file (11 bytes)"),
        ({"size": 10}, "fileSize", "fileSize does not match the uploaded file (11 bytes)"),
        ({"ct": "application/pdf"}, "contentType", "contentType does not match the uploaded file"),
        (
            {"name": "b.txt"},
            "fileKey",
            "fileKey is not the key issued for this fileId and fileName",
        ),
    ],
)
async def test_declared_fields_must_match_what_was_uploaded(
    client, alice, owner_engine, overrides, field, error
):
    kb = await make_kb(client, alice)
    upload = await uploaded(client, alice)
    response = await client.post(
        "/kb/files", json=body(kb["id"], upload, **overrides), headers=alice.headers
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"] == error
    assert [d["field"] for d in response.json()["details"]] == [field]


async def test_without_a_declared_size_the_real_size_is_recorded(client, alice):
    kb = await make_kb(client, alice)
    upload = await uploaded(client, alice)
    created = await client.post(
        "/kb/files", json=body(kb["id"], upload, size=...), headers=alice.headers
    )
    assert created.status_code == 201, created.text
    assert created.json()["file"]["fileSize"] == 11


async def test_an_upload_that_never_happened_cannot_be_associated(client, alice):
    kb = await make_kb(client, alice)
    upload = await presign(client, alice, name="a.txt", content_type="text/plain", size=11)
    response = await client.post("/kb/files", json=body(kb["id"], upload), headers=alice.headers)
    assert response.status_code == 400
    assert response.json()["error"] == "The file has not been uploaded yet"


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("size", "²"),
        ("size", "\u0661\u0660"),
        ("size", "-1"),
        ("size", "99999999999999999999999"),
        ("exp", "²"),
        ("exp", "9" * 30),
        ("exp", "99999999999999"),
        ("sig", "é" * 64),
        ("sig", "%00"),
        ("ct", "text/plain%ED%A0%80"),
        ("ct", "%FF%FE"),
    ],
)
async def test_malformed_signed_parameters_are_refused_without_a_500(
    client, alice, settings, param, value
):
    upload = await presign(client, alice, name="a.txt", content_type="text/plain", size=5)
    path, _, query = upload["uploadUrl"].removeprefix("http://testserver.local").partition("?")
    pairs = dict(pair.split("=", 1) for pair in query.split("&"))
    pairs[param] = value if "%" in value else quote(value)
    tampered = f"{path}?" + "&".join(f"{k}={v}" for k, v in pairs.items())
    response = await client.put(tampered, content=b"12345", headers={"Content-Type": "text/plain"})
    assert response.status_code in (400, 403), response.text
    assert set(response.json()) <= {"error", "details"}
    assert not (objects(settings) / upload["fileKey"]).exists()


@pytest.mark.parametrize("length", [b"\xb2", b"-1", b"x", b"1.0"])
async def test_a_malformed_content_length_is_400(client, alice, length):
    upload = await presign(client, alice, name="a.txt", content_type="text/plain", size=5)
    path = upload["uploadUrl"].removeprefix("http://testserver.local")
    response = await client.put(
        path, content=b"12345", headers={"Content-Type": "text/plain", "Content-Length": length}
    )
    assert response.status_code == 400, response.text


@pytest.mark.parametrize(
    "name",
    ["a\u0000.txt", "a\u001f.txt", "report.txt\n", "a\tb.txt", "\u202etxt.exe", "a\u2067b.pdf"],
)
async def test_presign_refuses_control_and_bidi_characters(client, alice, name):
    response = await client.post(
        "/upload/presigned",
        json={"fileName": name, "contentType": "text/plain", "fileSize": 1},
        headers=alice.headers,
    )
    assert response.status_code == 400, response.text
    assert response.json()["details"][0]["field"] == "fileName"
