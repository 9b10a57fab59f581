"""The upload flow (presign, signed PUT, associate) and `/kb/files`, end to end."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from adapters.storage.local_disk import LocalDiskStorage, load_or_create_secret
from domain.files import FILE_FIELDS_REQUIRED
from tests.http.helpers import add_file, association, make_kb, presign, put_upload

FILE_FIELDS = {
    "id",
    "knowledgeBaseId",
    "fileId",
    "fileName",
    "fileKey",
    "contentKey",
    "contentType",
    "fileSize",
    "processingStatus",
    "processingError",
    "imageKeys",
    "userMetadata",
    "extractedData",
    "ocrPages",
    "createdAt",
    "updatedAt",
}


def local_path(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.path}?{parts.query}"


async def test_the_whole_upload_flow(client, alice, settings, owner_engine):
    kb = await make_kb(client, alice)
    upload = await presign(client, alice, name="Q3 plan.md", size=11)
    assert upload["success"] is True and upload["method"] == "PUT"
    assert upload["headers"] == {"Content-Type": "text/markdown"}
    assert upload["fileKey"] == f"orgs/org_a/files/{upload['fileId']}/Q3_plan.md"
    assert upload["contentKey"] == f"orgs/org_a/files/{upload['fileId']}/content.md"
    assert upload["uploadUrl"].startswith("http://testserver.local/storage/orgs/org_a/")
    assert datetime.fromisoformat(upload["expiresAt"]) > datetime.now(UTC) + timedelta(minutes=14)

    put = await client.put(
        local_path(upload["uploadUrl"]),
        content=b"hello\x00world",
        headers={"Content-Type": "text/markdown"},
    )
    assert put.status_code == 200, put.text
    assert put.json() == {"success": True, "fileKey": upload["fileKey"], "size": 11}
    stored = settings.data_dir.resolve() / "objects" / upload["fileKey"]
    assert stored.read_bytes() == b"hello\x00world"

    response = await client.post(
        "/kb/files",
        json=association(
            kb["id"], upload, fileName="Q3 plan.md", fileSize=11, userMetadata={"team": "ops"}
        ),
        headers=alice.headers,
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["success"] is True
    record = body["file"]
    assert set(record) == FILE_FIELDS
    assert (record["processingStatus"], record["fileName"], record["fileSize"]) == (
        "parsing",
        "Q3 plan.md",
        11,
    )
    assert record["userMetadata"] == {"team": "ops"} and record["knowledgeBaseId"] == kb["id"]

    listed = await client.get(f"/kb/files?kbId={kb['id']}", headers=alice.headers)
    assert listed.status_code == 200
    assert listed.json() == {"success": True, "files": [record]}
    async with owner_engine.connect() as connection:
        payloads = (await connection.scalars(text("SELECT payload FROM pgqueuer"))).all()
    assert len(payloads) == 1 and str(record["id"]).encode() in payloads[0]


@pytest.mark.parametrize("field", ["fileId", "fileName", "fileKey", "contentKey", "contentType"])
@pytest.mark.parametrize("value", [..., None, ""])
async def test_each_missing_required_field(client, alice, owner_engine, field, value):
    kb = await make_kb(client, alice)
    upload = await presign(client, alice)
    response = await client.post(
        "/kb/files", json=association(kb["id"], upload, **{field: value}), headers=alice.headers
    )
    assert response.status_code == 400
    assert response.json() == {"error": FILE_FIELDS_REQUIRED}
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_base_files")) == 0


@pytest.mark.parametrize("kb_id", [..., None, "abc", 0, -5, 1.5, True, "1e3"])
async def test_kb_id_missing_or_not_an_integer(client, alice, kb_id):
    upload = await presign(client, alice)
    response = await client.post(
        "/kb/files", json=association(kb_id, upload), headers=alice.headers
    )
    assert response.status_code == 400
    assert response.json() == {"error": "Valid knowledge base ID is required"}


async def test_association_errors(client, alice, bob):
    kb = await make_kb(client, alice)
    theirs = await make_kb(client, bob)
    upload = await presign(client, alice)
    foreign_kb = await client.post(
        "/kb/files", json=association(theirs["id"], upload), headers=alice.headers
    )
    assert (foreign_kb.status_code, foreign_kb.json()) == (
        404,
        {"error": "Knowledge base not found"},
    )

    bobs_upload = await presign(client, bob)
    foreign_key = await client.post(
        "/kb/files",
        json=association(kb["id"], upload, fileKey=bobs_upload["fileKey"]),
        headers=alice.headers,
    )
    assert foreign_key.status_code == 400
    assert (
        foreign_key.json()["error"] == "fileKey must be a storage key issued to your organization"
    )

    wrong_type = await client.post(
        "/kb/files", json=association(kb["id"], upload, fileSize="big"), headers=alice.headers
    )
    # The message is the request schema's (being reworded in entrypoints/http/validation.py).
    assert wrong_type.status_code == 400 and "error" in wrong_type.json()

    not_uploaded = await client.post(
        "/kb/files", json=association(kb["id"], upload), headers=alice.headers
    )
    assert (not_uploaded.status_code, not_uploaded.json()["error"]) == (
        400,
        "The file has not been uploaded yet",
    )
    assert (await put_upload(client, upload, b"hello")).status_code == 200
    first = await client.post(
        "/kb/files", json=association(kb["id"], upload), headers=alice.headers
    )
    again = await client.post(
        "/kb/files", json=association(kb["id"], upload), headers=alice.headers
    )
    assert (first.status_code, again.status_code) == (201, 409)


@pytest.mark.parametrize(
    ("query", "status", "error"),
    [
        ("", 400, "Valid knowledge base ID is required"),
        ("?kbId=x", 400, "Valid knowledge base ID is required"),
        ("?kbId=99999", 404, "Knowledge base not found"),
    ],
)
async def test_list_files_errors(client, alice, query, status, error):
    response = await client.get(f"/kb/files{query}", headers=alice.headers)
    assert (response.status_code, response.json()) == (status, {"error": error})


async def test_files_are_listed_newest_first(client, alice):
    kb = await make_kb(client, alice)
    first = await add_file(client, alice, kb["id"])
    second = await add_file(client, alice, kb["id"])
    listed = (await client.get(f"/kb/files?kbId={kb['id']}", headers=alice.headers)).json()
    assert [f["id"] for f in listed["files"]] == [second["id"], first["id"]]


async def test_delete_file(client, alice, bob, settings):
    kb = await make_kb(client, alice)
    record = await add_file(client, alice, kb["id"])
    stored = settings.data_dir.resolve() / "objects" / record["fileKey"]
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_bytes(b"x")
    query = f"?kbId={kb['id']}&fileId={record['fileId']}"
    assert (await client.delete(f"/kb/files{query}", headers=bob.headers)).status_code == 404
    assert (
        await client.delete(f"/kb/files?kbId={kb['id']}&fileId=zz", headers=alice.headers)
    ).json() == {"error": "Valid file ID is required"}
    response = await client.delete(f"/kb/files{query}", headers=alice.headers)
    assert response.status_code == 200 and response.json()["success"] is True
    assert not stored.exists()
    again = await client.delete(f"/kb/files{query}", headers=alice.headers)
    assert (again.status_code, again.json()) == (404, {"error": "File not found"})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"contentType": "text/plain"}, "fileName is required"),
        ({"fileName": "a.txt"}, "contentType is required"),
        (
            {"fileName": "a.txt", "contentType": "text/plain", "fileSize": 4097},
            "exceeds the maximum upload size",
        ),
        (
            {"fileName": "a.txt", "contentType": "nonsense", "fileSize": 1},
            "Content type must be a MIME type",
        ),
        ({"fileName": "a.txt", "contentType": "text/plain"}, "fileSize is required"),
    ],
)
async def test_presign_refuses_bad_input(client, alice, body, message):
    response = await client.post("/upload/presigned", json=body, headers=alice.headers)
    assert response.status_code == 400 and message in response.json()["error"]


async def test_signed_upload_refusals_store_nothing(client, alice, settings):
    upload = await presign(client, alice, name="a.txt", content_type="text/plain", size=5)
    path = local_path(upload["uploadUrl"])
    stored = settings.data_dir.resolve() / "objects" / upload["fileKey"]
    cases = [
        (path.replace("sig=", "sig=0"), "text/plain", b"12345", 403),
        (path.replace("size=5", "size=50"), "text/plain", b"12345", 403),
        (path.replace("a.txt?", "b.txt?"), "text/plain", b"12345", 403),
        (path.split("?")[0], "text/plain", b"12345", 403),
        (path, "text/html", b"12345", 403),
        (path, "text/plain", b"123456", 413),
    ]
    for url, content_type, data, status in cases:
        response = await client.put(url, content=data, headers={"Content-Type": content_type})
        assert response.status_code == status, url
        assert "error" in response.json()
        assert not stored.exists()


async def test_expired_upload_is_refused(client, settings):
    data_dir = settings.data_dir.resolve()
    storage = LocalDiskStorage(
        data_dir / "objects",
        "http://testserver.local",
        load_or_create_secret(data_dir / "storage-signing.key"),
    )
    signed = await storage.sign_upload(
        "orgs/org_a/files/f/x.txt",
        content_type="text/plain",
        size=1,
        expires_at=datetime.now(UTC) - timedelta(1),
    )
    response = await client.put(
        local_path(signed.url), content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert (response.status_code, response.json()) == (403, {"error": "Upload URL has expired"})
