"""Authentication, the error contract and request ids, through the whole app."""

from __future__ import annotations

import time

import jwt
import pytest
from dishka import Provider, Scope, provide
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from application.use_cases.list_knowledge_bases import ListKnowledgeBases
from entrypoints.http.app import create_app

UNAUTHORIZED = {"error": "Unauthorized"}


def forged(idp, **claims):
    now = int(time.time())
    payload = {
        "iss": idp.issuer,
        "sub": "user_1",
        "iat": now,
        "exp": now + 60,
        "o": {"id": "org_a", "rol": "admin"},
        **claims,
    }
    return {k: v for k, v in payload.items() if v is not None}


@pytest.mark.parametrize(
    "make_header",
    [
        pytest.param(lambda idp: {}, id="missing"),
        pytest.param(lambda idp: {"Authorization": "Bearer"}, id="empty"),
        pytest.param(lambda idp: {"Authorization": "Basic dXNlcjpwYXNz"}, id="basic"),
        pytest.param(lambda idp: {"Authorization": "Bearer abc.def.ghi"}, id="garbage"),
        pytest.param(
            lambda idp: {"Authorization": "Bearer " + idp.issue(user_id="u", org_id="o", ttl=-120)},
            id="expired",
        ),
        pytest.param(
            lambda idp: {
                "Authorization": "Bearer " + jwt.encode(forged(idp), None, algorithm="none")
            },
            id="alg-none",
        ),
        pytest.param(
            lambda idp: {
                "Authorization": "Bearer "
                + jwt.encode(forged(idp), "k" * 32, algorithm="HS256", headers={"kid": idp.kid})
            },
            id="hmac",
        ),
        pytest.param(
            lambda idp: {
                "Authorization": "Bearer "
                + idp.issue(user_id="u", org_id="o", extra={"iss": "https://other-issuer.test"})
            },
            id="other-issuer",
        ),
    ],
)
async def test_bad_credentials_get_401_and_change_nothing(client, idp, owner_engine, make_header):
    for method, path, body in (
        ("GET", "/kb/manage", None),
        ("POST", "/kb/manage", {"name": "x"}),
        ("GET", "/kb/files?kbId=1", None),
        ("POST", "/upload/presigned", {"fileName": "a", "contentType": "text/plain"}),
    ):
        response = await client.request(method, path, json=body, headers=make_header(idp))
        assert response.status_code == 401, (method, path)
        assert response.json() == UNAUTHORIZED
    async with owner_engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM knowledge_bases")) == 0
        assert await connection.scalar(text("SELECT count(*) FROM memberships")) == 0


async def test_two_authorization_headers_are_refused_even_when_both_are_valid(client, alice):
    token = alice.headers["Authorization"]
    response = await client.get(
        "/kb/manage", headers=[("Authorization", token), ("authorization", token)]
    )
    assert (response.status_code, response.json()) == (401, UNAUTHORIZED)
    lower = await client.get("/kb/manage", headers={"authorization": token.lower()[:7] + token[7:]})
    assert lower.status_code == 200


async def test_public_paths_and_preflights_need_no_token(client):
    for path in ("/health", "/health/live", "/schema/openapi.json", "/.well-known/jwks.json"):
        response = await client.get(path)
        assert response.status_code == 200, path
    assets = await client.get("/schema/assets/swagger-ui.css")  # a mount: its raw path is read
    assert assets.status_code == 200
    # A preflight is not a request for data: it passes to the router without a token.
    preflight = await client.options("/kb/manage")
    assert preflight.status_code != 401
    # A public prefix inside a protected path opens nothing.
    assert (await client.get("/kb/manage?next=/health")).status_code == 401


async def test_a_token_without_organization_is_403(client, idp):
    token = idp.issue(user_id="user_1", org_id=None)
    response = await client.get("/kb/manage", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403
    assert response.json() == {"error": "User is not part of any organization"}


async def test_first_request_provisions_the_member_from_claims(client, alice, owner_engine):
    response = await client.get("/kb/manage", headers=alice.headers)
    assert response.status_code == 200
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT org_id, user_id, email, role, last_sign_in_at IS NOT NULL "
                    "FROM memberships"
                )
            )
        ).one()
    assert tuple(row) == ("org_a", "user_alice", "alice@a.test", "org:admin", True)


async def test_every_response_carries_a_request_id(client, alice):
    own = await client.get("/kb/manage", headers=alice.headers)
    assert len(own.headers["x-request-id"]) == 32
    echoed = await client.get("/kb/manage", headers={**alice.headers, "X-Request-ID": "abc-123"})
    assert echoed.headers["x-request-id"] == "abc-123"
    for response in (
        await client.get("/no/such/route"),
        await client.get("/kb/manage"),
        await client.get("/health"),
        await client.get("/kb/manage", headers={"X-Request-ID": "x" * 500}),
    ):
        assert response.headers["x-request-id"]
        assert response.headers["x-request-id"] != "x" * 500


async def test_unknown_route_and_method_use_the_error_shape(client, alice):
    missing = await client.get("/no/such/route", headers=alice.headers)
    assert (missing.status_code, missing.json()) == (404, {"error": "Not Found"})
    wrong = await client.put("/kb/manage", headers=alice.headers, json={})
    assert (wrong.status_code, wrong.json()) == (405, {"error": "Method Not Allowed"})
    assert wrong.headers["allow"] == "DELETE, GET, PATCH, POST"


@pytest.mark.parametrize(
    "path", ["/admin/updateUserMetadata", "/admin/bulkRemove", "/webhooks/inbound-email"]
)
async def test_a_post_only_path_answers_another_method_with_allow_post(client, alice, path):
    for method in ("GET", "PUT", "DELETE", "HEAD"):
        wrong = await client.request(method, path, headers=alice.headers)
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST"), method


async def test_options_names_every_method_the_document_gives_a_path(client):
    """Each path's handlers may come from several registrations (`GET /kb/files` and
    `POST /kb/files`): the answer still names all of them, without a token."""
    document = (await client.get("/schema/openapi.json")).json()
    assert len(document["paths"]) > 30
    for path, operations in document["paths"].items():
        methods = {method.upper() for method in operations if method != "parameters"}
        response = await client.options(path.replace("{", "").replace("}", ""))
        allow = response.headers["allow"].split(", ")
        assert response.status_code == 204, path
        assert allow == sorted(allow), path
        # ⊆: a path may also serve an undocumented method (signed downloads on local disk)
        assert {*methods, "OPTIONS"} <= set(allow), path
    files = await client.options("/kb/files")
    assert files.headers["allow"] == "DELETE, GET, OPTIONS, POST"


class ExplodingList(ListKnowledgeBases):
    async def execute(self, query):  # type: ignore[override]
        raise RuntimeError("relation secret_table at /srv/app.py line 3 SELECT password")


class Exploding(Provider):
    @provide(scope=Scope.REQUEST)
    def listing(self) -> ListKnowledgeBases:
        return ExplodingList(None)  # type: ignore[arg-type]


async def test_500_reveals_nothing_internal(settings, database, clean, alice):
    async with AsyncTestClient(app=create_app(settings, database, Exploding())) as client:
        response = await client.get("/kb/manage", headers=alice.headers)
    assert response.status_code == 500
    assert response.json() == {"error": "Internal Server Error"}
    assert "secret" not in response.text and response.headers["x-request-id"]


async def test_malformed_json_is_a_clear_400(client, alice):
    response = await client.post(
        "/kb/manage",
        content=b'{"name": "x",',
        headers={**alice.headers, "content-type": "application/json"},
    )
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "Malformed request body"
    assert body["details"][0]["field"] == "body"


async def test_wrong_types_name_the_field(client, alice):
    response = await client.post("/kb/manage", json={"name": 12}, headers=alice.headers)
    assert response.status_code == 400
    body = response.json()
    assert body["error"] == "Invalid request body"
    assert any(
        "name" in detail["field"] or "name" in detail["message"] for detail in body["details"]
    )


async def test_jwks_of_the_development_identity_provider(client, idp):
    response = await client.get("/.well-known/jwks.json")
    assert response.status_code == 200
    (key,) = response.json()["keys"]
    assert (key["kid"], key["alg"], key["kty"]) == (idp.kid, "RS256", "RSA")
    assert "d" not in key
