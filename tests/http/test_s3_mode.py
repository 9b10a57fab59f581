"""The same upload flow with `AP_STORAGE=s3`: the adapter is swapped by configuration only. An
address replayed after its file was deleted leaves no object behind for long (the bucket takes
the PUT itself), and a replaced skill file goes to a key of its own."""

from __future__ import annotations

import dataclasses

import boto3
import httpx
from litestar.testing import AsyncTestClient

from entrypoints.config import Settings
from entrypoints.http.app import create_app
from tests.http.helpers import association, make_kb, presign


def on_s3(settings: Settings, endpoint: str, bucket: str) -> Settings:
    """`settings` storing in a new `bucket` of the S3 server at `endpoint`."""
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1").create_bucket(Bucket=bucket)
    return dataclasses.replace(
        settings, storage="s3", s3_bucket=bucket, s3_endpoint_url=endpoint, s3_path_style=True
    )


async def test_upload_flow_on_s3(settings, database, clean, alice, s3_endpoint):
    s3_settings = on_s3(settings, s3_endpoint, "ap-http")
    async with AsyncTestClient(app=create_app(s3_settings, database)) as client:
        kb = await make_kb(client, alice)
        upload = await presign(client, alice, name="a.md", size=5)
        assert upload["uploadUrl"].startswith(f"{s3_endpoint}/ap-http/orgs/org_a/files/")
        async with httpx.AsyncClient() as http:
            put = await http.put(upload["uploadUrl"], content=b"hello", headers=upload["headers"])
        assert put.status_code == 200
        response = await client.post(
            "/kb/files", json=association(kb["id"], upload, fileName="a.md"), headers=alice.headers
        )
        assert response.status_code == 201
        # The local-disk upload route does not exist when objects live in S3.
        local = await client.put("/storage/" + upload["fileKey"], content=b"x")
        assert local.status_code in (404, 405)
        deleted = await client.delete(f"/kb/manage?kbId={kb['id']}", headers=alice.headers)
        assert deleted.status_code == 200
    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    assert s3.list_objects_v2(Bucket="ap-http").get("KeyCount", 0) == 0


async def test_the_worker_processes_files_stored_in_s3(
    settings, database, clean, alice, s3_endpoint, registry
):
    import asyncio

    from entrypoints.worker.jobs import build_worker
    from tests.http.processing_support import HANDBOOK, EmbedderOverride, settle

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3_settings = on_s3(settings, s3_endpoint, "ap-worker")
    override = EmbedderOverride(registry)
    async with AsyncTestClient(app=create_app(s3_settings, database, override)) as client:
        kb = await make_kb(client, alice)
        upload = await presign(client, alice, name="handbook.md", size=len(HANDBOOK))
        async with httpx.AsyncClient() as http:
            put = await http.put(
                upload["uploadUrl"], content=HANDBOOK.encode(), headers=upload["headers"]
            )
        assert put.status_code == 200
        body = association(kb["id"], upload, fileName="handbook.md", fileSize=len(HANDBOOK))
        assert (await client.post("/kb/files", json=body, headers=alice.headers)).status_code == 201
        worker, container = build_worker(s3_settings, database, override, concurrency=1)
        running = asyncio.create_task(worker.run())
        try:
            (done,) = await settle(client, alice, kb["id"])
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
            await container.close()
    assert done["processingStatus"] == "completed", done
    content = s3.get_object(Bucket="ap-worker", Key=upload["contentKey"])["Body"].read()
    assert b"thirty days" in content


async def test_s3_uploads_are_bound_used_once_and_downloadable(
    settings, database, clean, alice, s3_endpoint
):
    from urllib.parse import parse_qs, urlsplit

    s3_settings = on_s3(settings, s3_endpoint, "ap-bound")
    app = create_app(s3_settings, database)
    async with AsyncTestClient(app=app) as client:
        kb = await make_kb(client, alice)
        upload = await presign(client, alice, name="a.md", size=5)
        assert upload["headers"] == {"Content-Type": "text/markdown", "If-None-Match": "*"}
        signed = parse_qs(urlsplit(upload["uploadUrl"]).query)["X-Amz-SignedHeaders"]
        assert signed == ["content-length;content-type;host;if-none-match"]
        async with httpx.AsyncClient() as http:
            first = await http.put(upload["uploadUrl"], content=b"hello", headers=upload["headers"])
            replay = await http.put(
                upload["uploadUrl"], content=b"HELLO", headers=upload["headers"]
            )
        assert (first.status_code, replay.status_code) == (200, 412)
        for overrides, field in (
            ({"fileSize": 4}, "fileSize"),
            ({"contentType": "text/plain"}, "contentType"),
        ):
            refused = await client.post(
                "/kb/files",
                json=association(kb["id"], upload, fileName="a.md", **overrides),
                headers=alice.headers,
            )
            assert refused.status_code == 400, refused.text
            assert refused.json()["details"][0]["field"] == field
        created = await client.post(
            "/kb/files", json=association(kb["id"], upload, fileName="a.md"), headers=alice.headers
        )
        assert created.status_code == 201, created.text
        record = created.json()["file"]
        response = await client.get(
            f"/kb/files/download?kbId={kb['id']}&fileId={record['fileId']}",
            headers=alice.headers,
            follow_redirects=False,
        )
        assert response.status_code == 302
        location = response.headers["location"]
        assert location.startswith(f"{s3_endpoint}/ap-bound/{record['fileKey']}?")
        assert "response-content-disposition=attachment" in location
        async with httpx.AsyncClient() as http:
            served = await http.get(location)
        assert served.status_code == 200 and served.content == b"hello"


async def test_an_s3_address_replayed_after_deletion_leaves_no_object(
    settings, database, clean, alice, s3_endpoint, owner_engine
):
    import asyncio

    from sqlalchemy import text

    from entrypoints.worker.jobs import build_worker

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3_settings = on_s3(settings, s3_endpoint, "ap-replay")

    def keys() -> list[str]:
        return [o["Key"] for o in s3.list_objects_v2(Bucket="ap-replay").get("Contents", [])]

    async with AsyncTestClient(app=create_app(s3_settings, database)) as client:
        kb = await make_kb(client, alice)
        upload = await presign(client, alice, name="a.md", size=5)

        async def put(data: bytes) -> int:
            async with httpx.AsyncClient() as http:
                sent = await http.put(upload["uploadUrl"], content=data, headers=upload["headers"])
            return sent.status_code

        body = association(kb["id"], upload, fileName="a.md")
        assert await put(b"hello") == 200
        assert (await client.post("/kb/files", json=body, headers=alice.headers)).status_code == 201
        deleted = await client.delete(
            f"/kb/files?kbId={kb['id']}&fileId={upload['fileId']}", headers=alice.headers
        )
        assert deleted.status_code == 200 and keys() == []
        # The bucket checks only the signature: a replay while the address is valid is stored,
        assert await put(b"HELLO") == 200 and keys() == [upload["fileKey"]]
        # but it is never associated, and the refusal removes it.
        again = await client.post("/kb/files", json=body, headers=alice.headers)
        assert (again.status_code, again.json()["error"]) == (
            409,
            "The file this upload was issued for has been deleted",
        )
        assert keys() == []
        # One nobody tries to associate goes with the purge the deletion queued for after the
        # address expires (brought forward here).
        assert await put(b"HELLO") == 200 and keys() == [upload["fileKey"]]
        async with owner_engine.begin() as connection:
            queued = await connection.scalar(
                text(
                    "SELECT count(*) FROM pgqueuer WHERE entrypoint = 'upload.purge' "
                    "AND execute_after > now() + interval '1 hour'"
                )
            )
            assert queued == 1
            await connection.execute(
                text("UPDATE pgqueuer SET execute_after = now() WHERE entrypoint = 'upload.purge'")
            )
        worker, container = build_worker(s3_settings, database, concurrency=1)
        running = asyncio.create_task(worker.run())
        try:
            for _ in range(200):
                if not keys():
                    break
                await asyncio.sleep(0.1)
        finally:
            worker.stop()
            await asyncio.wait_for(running, 30)
            await container.close()
        assert keys() == []


async def test_skill_files_on_s3(settings, database, clean, alice, s3_endpoint):
    import base64

    s3 = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1")
    s3_settings = on_s3(settings, s3_endpoint, "ap-skills")
    skill_md = "---\nname: notes\ndescription: Keep notes.\n---\nWrite them down.\n"
    async with AsyncTestClient(app=create_app(s3_settings, database)) as client:
        created = await client.post(
            "/skills/manage", json={"skillMd": skill_md}, headers=alice.headers
        )
        sid = created.json()["skill"]["id"]
        body = {"skillId": sid, "path": "a/b.md", "content": base64.b64encode(b"# B").decode()}

        def stored() -> dict[str, bytes]:
            listing = s3.list_objects_v2(Bucket="ap-skills").get("Contents", [])
            return {
                o["Key"]: s3.get_object(Bucket="ap-skills", Key=o["Key"])["Body"].read()
                for o in listing
            }

        added = await client.post("/skills/files", json=body, headers=alice.headers)
        assert added.status_code == 201, added.text
        ((key, data),) = stored().items()
        assert key.startswith(f"orgs/org_a/skills/{sid}/") and data == b"# B"
        read = await client.get(f"/skills/files?skillId={sid}&path=a/b.md", headers=alice.headers)
        assert read.content == b"# B" and read.headers["content-type"].startswith("text/markdown")
        # A replacement goes to a key of its own; the replaced object goes after the commit.
        changed = {**body, "content": base64.b64encode(b"# C").decode()}
        assert (await client.post("/skills/files", json=changed, headers=alice.headers)).is_success
        ((new_key, data),) = stored().items()
        assert new_key != key and data == b"# C"
        read = await client.get(f"/skills/files?skillId={sid}&path=a/b.md", headers=alice.headers)
        assert read.content == b"# C"
        gone = await client.delete(
            f"/skills/files?skillId={sid}&path=a/b.md", headers=alice.headers
        )
        assert gone.status_code == 200
        assert s3.list_objects_v2(Bucket="ap-skills").get("KeyCount", 0) == 0
        again = await client.post("/skills/files", json=body, headers=alice.headers)
        assert again.status_code == 201
        deleted = await client.delete(f"/skills/manage?skillId={sid}", headers=alice.headers)
        assert deleted.status_code == 200
    # A soft-deleted skill keeps its bundled files in storage.
    assert list(stored().values()) == [b"# B"]
