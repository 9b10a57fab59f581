"""The web console as the service serves it (CONTRACT.md, "The console"): its files from a
folder standing in for console/dist (`AP_CONSOLE_DIR`), their caching, compression and security
headers, client-side routes, the page shown when it is not built, `config.json` in each
identity mode and the development sign-in."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

import jwt
import pytest
from litestar.testing import AsyncTestClient

from entrypoints.http.app import create_app

INDEX = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Agent Platform</title>'
    '<script type="module" crossorigin src="/console/assets/index-3f2a9c1b.js"></script>'
    '</head><body><div id="root"></div></body></html>\n'
)
ASSET = "assets/index-3f2a9c1b.js"
SCRIPT = "export function hello(name) { return `Hello, ${name}`; }\n" * 40
IMMUTABLE = "public, max-age=31536000, immutable"
ISSUER = "https://idp.example.test"
PLAIN = {"Accept-Encoding": "identity"}


def make_console(folder: Path) -> Path:
    (folder / "assets").mkdir(parents=True)
    (folder / "index.html").write_text(INDEX)
    (folder / ASSET).write_text(SCRIPT)
    (folder / "favicon.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>')
    return folder


@pytest.fixture(scope="module")
def console_dir(tmp_path_factory) -> Path:
    return make_console(tmp_path_factory.mktemp("console") / "dist")


@asynccontextmanager
async def serving(settings, database, **changes) -> AsyncIterator[AsyncTestClient]:
    # The test client's peer is "testclient", not a loopback address: the development sign-in
    # answers it only when allowed from anywhere (its default, loopback, has a test of its own).
    changes.setdefault("console_dev_sign_in", "anywhere")
    app = create_app(dataclasses.replace(settings, **changes), database)
    async with AsyncTestClient(app=app) as client:
        yield client


@pytest.fixture(scope="module")
async def console(settings, database, console_dir) -> AsyncIterator[AsyncTestClient]:
    async with serving(settings, database, console_dir=console_dir) as client:
        yield client


def external(**more) -> dict:
    """An external identity provider: the service issues no token of its own."""
    return {"auth_jwks_url": f"{ISSUER}/.well-known/jwks.json", "auth_issuer": ISSUER, **more}


def csp(response) -> dict[str, list[str]]:
    policy = response.headers["content-security-policy"]
    return {
        directive.split()[0]: directive.split()[1:]
        for directive in (d.strip() for d in policy.split(";"))
        if directive
    }


def assert_secured(response) -> None:
    policy = csp(response)
    assert policy["script-src"] == ["'self'"]
    assert "'unsafe-inline'" not in response.headers["content-security-policy"]
    assert "'unsafe-eval'" not in response.headers["content-security-policy"]
    assert policy["frame-ancestors"] == ["'none'"] and policy["object-src"] == ["'none'"]
    assert policy["base-uri"] == ["'none'"] and policy["default-src"] == ["'self'"]
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["referrer-policy"] == "no-referrer"
    assert response.headers["x-frame-options"] == "DENY"


async def test_the_console_redirects_to_its_folder_and_serves_index_without_a_token(console):
    moved = await console.get("/console", follow_redirects=False)
    assert moved.status_code in (301, 302, 307, 308)
    assert moved.headers["location"] == "/console/"
    page = await console.get("/console/", headers=PLAIN)
    assert page.status_code == 200
    assert page.text == INDEX
    assert page.headers["content-type"].startswith("text/html")
    assert page.headers["cache-control"] == "no-cache"
    assert page.headers["x-request-id"]
    assert_secured(page)
    assert_secured(moved)


@pytest.mark.parametrize(
    "path",
    ["/console/chat/0b6e2f4e-4c1b-4e7a-9a43-0c3c6a1f7f11", "/console/knowledge/3", "/console/x/"],
)
async def test_client_side_routes_get_index(console, path):
    response = await console.get(path, headers=PLAIN)
    assert (response.status_code, response.text) == (200, INDEX), path
    assert response.headers["cache-control"] == "no-cache"
    assert_secured(response)


async def test_hashed_assets_are_immutable_and_other_files_revalidated(console):
    asset = await console.get(f"/console/{ASSET}", headers=PLAIN)
    assert (asset.status_code, asset.text) == (200, SCRIPT)
    assert asset.headers["cache-control"] == IMMUTABLE
    assert asset.headers["content-type"].startswith("text/javascript")
    assert_secured(asset)
    icon = await console.get("/console/favicon.svg", headers=PLAIN)
    assert icon.status_code == 200 and icon.headers["content-type"] == "image/svg+xml"
    assert icon.headers["cache-control"] == "no-cache"
    # Revalidation: the ETag answers 304 without the body.
    again = await console.get(
        f"/console/{ASSET}", headers={**PLAIN, "If-None-Match": asset.headers["etag"]}
    )
    assert again.status_code == 304 and again.content == b""


@pytest.mark.parametrize(
    "path", ["/console/missing.js", "/console/assets/index-00000000.js", "/console/assets/nothing"]
)
async def test_a_missing_file_is_404(console, path):
    response = await console.get(path)
    assert response.status_code == 404
    assert response.json() == {"error": "Not Found"}
    assert_secured(response)


async def test_head_works_where_get_does(console):
    for path in ("/console/", f"/console/{ASSET}", "/console/chat/1", "/console/config.json"):
        got = await console.get(path, headers=PLAIN)
        head = await console.head(path, headers=PLAIN)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers["content-length"] == str(len(got.content))
        assert head.headers["content-type"] == got.headers["content-type"]
    assert (await console.head("/console/missing.js")).status_code == 404


async def test_gzip_only_when_the_client_takes_it(console):
    packed = await console.get(f"/console/{ASSET}", headers={"Accept-Encoding": "gzip"})
    assert packed.headers["content-encoding"] == "gzip"
    assert packed.headers["vary"] == "Accept-Encoding"
    assert packed.text == SCRIPT  # httpx unpacks it
    assert int(packed.headers["content-length"]) < len(SCRIPT) // 4
    for refused in ("identity", "gzip;q=0, identity", "br"):
        plain = await console.get(f"/console/{ASSET}", headers={"Accept-Encoding": refused})
        assert "content-encoding" not in plain.headers, refused
        assert plain.headers["vary"] == "Accept-Encoding"
        assert plain.content == SCRIPT.encode()


async def test_the_api_is_never_compressed(console, clean, alice):
    response = await console.get("/kb/manage", headers={**alice.headers, "Accept-Encoding": "gzip"})
    assert "content-encoding" not in response.headers


@pytest.mark.parametrize(
    "raw_path",
    [
        "/console/../pyproject.toml",
        "/console/%2e%2e/%2e%2e/pyproject.toml",
        "/console/assets/%2e%2e/%2e%2e/index.html",
        "/console/..%2fsecret.txt",
        "/console/%2e%2e%5csecret.txt",
        "/console/secret.txt%00.js",
        "/console/.hidden.txt",
        "/console/link.txt",
    ],
)
async def test_nothing_outside_the_folder_is_served(settings, database, tmp_path, raw_path):
    folder = make_console(tmp_path / "dist")
    (tmp_path / "secret.txt").write_text("secret")
    (folder / ".hidden.txt").write_text("secret")
    (folder / "link.txt").symlink_to(tmp_path / "secret.txt")
    async with serving(settings, database, console_dir=folder) as client:
        # Sent as written: httpx would resolve the dots of a URL itself.
        response = await client.request("GET", httpx_raw(client, raw_path))
    assert response.status_code in (400, 404), raw_path
    assert b"secret" not in response.content


def httpx_raw(client: AsyncTestClient, raw_path: str):
    """A URL whose path httpx sends as it is (no dot-segment removal)."""
    import httpx

    return httpx.URL(str(client.base_url)).copy_with(raw_path=raw_path.encode())


async def test_a_console_not_built_answers_503_with_how_to_build_it(settings, database, tmp_path):
    empty = tmp_path / "dist"
    empty.mkdir()
    async with serving(settings, database, console_dir=empty) as client:
        for path in ("/console/", "/console/chat/1"):
            page = await client.get(path)
            assert page.status_code == 503
            assert page.headers["content-type"].startswith("text/html")
            assert "make console" in page.text and "npm run build --prefix console" in page.text
            assert "<script" not in page.text
            assert_secured(page)
        assert (await client.get("/console/config.json")).status_code == 200
        assert (await client.get("/health")).status_code == 200
        # Built while the service runs: seen at the next request.
        make_console(empty)
        assert (await client.get("/console/")).text == INDEX


async def test_csp_names_the_issuer_and_the_object_store(settings, database, console_dir):
    async with serving(
        settings,
        database,
        console_dir=console_dir,
        storage="s3",
        s3_bucket="uploads",
        s3_endpoint_url="http://minio.example.test:9000",
        s3_path_style=True,
        **external(auth_issuer=f"{ISSUER}/tenant/"),
    ) as client:
        page = await client.get("/console/")
    policy = csp(page)
    assert policy["connect-src"] == ["'self'", ISSUER, "http://minio.example.test:9000"]
    assert policy["form-action"] == ["'self'", ISSUER]
    assert_secured(page)


async def test_the_development_provider_adds_no_origin(console):
    policy = csp(await console.get("/console/"))
    assert policy["form-action"] == ["'self'"]
    assert all(o == "'self'" or o.startswith("http") for o in policy["connect-src"])
    assert ISSUER not in policy["connect-src"]


async def test_config_in_development(console):
    response = await console.get("/console/config.json")
    assert response.status_code == 200
    assert response.json() == {"identityProvider": "development", "oidc": None}
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["content-type"].startswith("application/json")


async def test_config_with_an_openid_provider(settings, database, console_dir):
    async with serving(
        settings, database, console_dir=console_dir, **external(console_oidc_client_id="console")
    ) as client:
        with_client = (await client.get("/console/config.json")).json()
    assert with_client == {
        "identityProvider": "oidc",
        "oidc": {
            "authority": ISSUER,
            "clientId": "console",
            "scope": "openid profile email offline_access",
        },
    }
    async with serving(settings, database, console_dir=console_dir, **external()) as client:
        response = await client.get("/console/config.json")
        assert response.json() == {"identityProvider": "external", "oidc": None}
        # No development sign-in with an external provider: not a route at all.
        refused = await client.post(
            "/console/sign-in", json={"userId": "user_ada", "orgId": "org_demo", "role": "admin"}
        )
        assert refused.status_code == 404
        assert (await client.get("/console/sign-in")).text == INDEX


async def test_sign_in_gives_a_token_the_service_accepts(console, clean):
    before = datetime.now(UTC)
    response = await console.post(
        "/console/sign-in",
        json={"userId": "user_ada", "orgId": "org_demo", "role": "admin", "email": "ada@x.test"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert set(body) == {"token", "expiresAt"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", body["expiresAt"])
    expires = datetime.fromisoformat(body["expiresAt"].replace("Z", "+00:00"))
    assert 3590 <= (expires - before).total_seconds() <= 3610  # AP_CONSOLE_TOKEN_TTL
    claims = jwt.decode(body["token"], options={"verify_signature": False})
    assert claims["sub"] == "user_ada" and claims["o"]["id"] == "org_demo"
    assert claims["email"] == "ada@x.test"
    headers = {"Authorization": f"Bearer {body['token']}"}
    created = await console.post("/kb/manage", json={"name": "Signed in"}, headers=headers)
    assert created.status_code == 201, created.text
    # An administrator's token: the admin routes are open to it.
    assert (await console.get("/admin/getUsersInOrg", headers=headers)).status_code == 200
    member = await console.post(
        "/console/sign-in", json={"userId": "user_bob", "orgId": "org_demo", "role": "member"}
    )
    member_headers = {"Authorization": f"Bearer {member.json()['token']}"}
    refused = await console.get("/admin/getUsersInOrg", headers=member_headers)
    assert refused.status_code == 403


async def test_sign_in_answers_only_this_machine_by_default(settings, database, console_dir):
    async with serving(
        settings, database, console_dir=console_dir, console_dev_sign_in="loopback"
    ) as client:
        response = await client.post(
            "/console/sign-in", json={"userId": "user_ada", "orgId": "org_a", "role": "admin"}
        )
    assert response.status_code == 403
    assert "only on this machine" in response.json()["error"]
    assert "token" not in response.json()


async def test_sign_in_lifetime_is_a_setting(settings, database, console_dir):
    async with serving(
        settings, database, console_dir=console_dir, console_token_ttl=120
    ) as client:
        response = await client.post(
            "/console/sign-in", json={"userId": "user_ada", "orgId": "org_a", "role": "member"}
        )
    claims = jwt.decode(response.json()["token"], options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 120


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({"orgId": "org_a", "role": "admin"}, "userId must be a user identifier", "userId"),
        ({"userId": "ada", "orgId": "org_a", "role": "admin"}, "userId", "userId"),
        ({"userId": "user_ada\n", "orgId": "org_a", "role": "admin"}, "userId", "userId"),
        ({"userId": "user_" + "a" * 65, "orgId": "org_a", "role": "admin"}, "userId", "userId"),
        ({"userId": 7, "orgId": "org_a", "role": "admin"}, "userId", "userId"),
        ({"userId": "user_ada", "orgId": "../org", "role": "admin"}, "orgId", "orgId"),
        ({"userId": "user_ada", "orgId": "", "role": "admin"}, "orgId", "orgId"),
        ({"userId": "user_ada", "orgId": "o" * 129, "role": "admin"}, "orgId", "orgId"),
        ({"userId": "user_ada", "orgId": "org a", "role": "admin"}, "orgId", "orgId"),
        ({"userId": "user_ada", "orgId": "org_a", "role": "owner"}, "role", "role"),
        ({"userId": "user_ada", "orgId": "org_a", "role": "org:admin"}, "role", "role"),
        ({"userId": "user_ada", "orgId": "org_a"}, "role", "role"),
        ({"userId": "user_ada", "orgId": "org_a", "role": "admin", "email": "x"}, "email", "email"),
        (
            {"userId": "user_ada", "orgId": "org_a", "role": "admin", "email": "a@b.c\n"},
            "email",
            "email",
        ),
    ],
)
async def test_sign_in_refuses_bad_input(console, body, error, field):
    response = await console.post("/console/sign-in", json=body)
    assert response.status_code == 400, response.text
    answer = response.json()
    assert error in answer["error"]
    assert [d["field"] for d in answer["details"]] == [field]


async def test_sign_in_refuses_what_is_not_json(console):
    malformed = await console.post(
        "/console/sign-in", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert malformed.status_code == 400 and "error" in malformed.json()
    wrong_type = await console.post(
        "/console/sign-in", content=b"x", headers={"Content-Type": "text/plain"}
    )
    assert wrong_type.status_code == 415


async def test_the_console_routes_are_not_in_the_api_document(console):
    document = (await console.get("/schema/openapi.json")).json()
    assert not [path for path in document["paths"] if path.startswith("/console")]


async def test_other_methods_are_refused(console):
    response = await console.delete("/console/")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, HEAD"
