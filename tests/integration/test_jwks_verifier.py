"""Token verification against a JWKS served over real HTTP on loopback."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from adapters.identity.jwks import JwksTokenVerifier, http_jwks_fetcher
from domain.errors import Unauthenticated

ISSUER = "https://idp.test"


class JwksServer:
    def __init__(self) -> None:
        self.keys: list[Any] = []
        self.hits = 0
        self.status = 200  # anything else: the provider failing
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with server.lock:
                    server.hits += 1
                body = json.dumps({"keys": server.keys}).encode()
                self.send_response(server.status)
                self.send_header("content-type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/jwks.json"
        # A short poll, so that shutting the server down at the end of a test is quick.
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()

    def publish(self, private_key, kid: str, alg: str) -> None:
        algorithm = RSAAlgorithm if alg == "RS256" else ECAlgorithm
        jwk = json.loads(algorithm.to_jwk(private_key.public_key()))
        self.keys.append({**jwk, "kid": kid, "alg": alg, "use": "sig"})


@pytest.fixture
def server() -> Iterator[JwksServer]:
    server = JwksServer()
    yield server
    server.httpd.shutdown()


RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())


def claims(**overrides):
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "sub": "user_1",
        "iat": now,
        "exp": now + 60,
        "o": {"id": "org_a", "rol": "admin"},
        "azp": "https://app.test",
        "aud": "api",
    }
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not None}


def sign(payload, key=RSA_KEY, alg="RS256", kid="rsa-1"):
    return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture
async def verify(server):
    server.publish(RSA_KEY, "rsa-1", "RS256")
    server.publish(EC_KEY, "ec-1", "ES256")
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(
            http_jwks_fetcher(server.url, client),
            issuer=ISSUER,
            audience=["api"],
            authorized_parties=["https://app.test"],
            leeway=600,
            refetch_interval=30,
        )
        yield verifier.verify


async def test_rs256_and_es256_tokens_are_accepted(verify):
    identity = await verify(sign(claims()))
    assert (identity.user_id, identity.org_id, identity.role) == ("user_1", "org_a", "org:admin")
    assert (await verify(sign(claims(), EC_KEY, "ES256", "ec-1"))).user_id == "user_1"


def _hmac_with_public_key() -> str:
    from cryptography.hazmat.primitives import serialization

    pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    import base64
    import hashlib
    import hmac

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    header = b64(json.dumps({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}).encode())
    body = b64(json.dumps(claims()).encode())
    signature = hmac.new(pem, f"{header}.{body}".encode(), hashlib.sha256).digest()
    return f"{header}.{body}.{b64(signature)}"


def _embedded_jwk() -> str:
    """Signed with another key that the header carries (`jwk`) and points to (`jku`)."""
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = {**json.loads(RSAAlgorithm.to_jwk(attacker.public_key())), "kid": "rsa-1"}
    headers = {"kid": "rsa-1", "jwk": jwk, "jku": "http://127.0.0.1:9/jwks.json"}
    return jwt.encode(claims(), attacker, algorithm="RS256", headers=headers)


def _tampered() -> str:
    """A genuine token whose payload was swapped for one naming another organization."""
    head, _, signature = sign(claims(o={"id": "org_a", "rol": "member"})).split(".")
    body = jwt.utils.base64url_encode(json.dumps(claims(o={"id": "org_b"})).encode()).decode()
    return f"{head}.{body}.{signature}"


@pytest.mark.parametrize(
    "token",
    [
        pytest.param(lambda: "not-a-jwt", id="garbage"),
        pytest.param(lambda: jwt.encode(claims(), None, algorithm="none"), id="alg-none"),
        pytest.param(_hmac_with_public_key, id="hmac-with-public-key"),
        pytest.param(
            lambda: jwt.encode(claims(), "s" * 32, algorithm="HS256", headers={"kid": "rsa-1"}),
            id="hs256",
        ),
        pytest.param(lambda: sign(claims(iss="https://evil.test")), id="other-issuer"),
        pytest.param(lambda: sign(claims(exp=int(time.time()) - 700)), id="expired"),
        pytest.param(lambda: sign(claims(exp=None)), id="no-exp"),
        pytest.param(lambda: sign(claims(iat=None)), id="no-iat"),
        pytest.param(lambda: sign(claims(sub=None)), id="no-sub"),
        pytest.param(lambda: sign(claims(iat=int(time.time()) + 3600)), id="iat-in-future"),
        pytest.param(lambda: sign(claims(aud="other")), id="wrong-audience"),
        pytest.param(lambda: sign(claims(azp="https://evil.test")), id="wrong-azp"),
        pytest.param(lambda: sign(claims(azp=["https://app.test"])), id="azp-as-a-list"),
        pytest.param(lambda: sign(claims(azp={"p": "https://app.test"})), id="azp-as-an-object"),
        pytest.param(lambda: sign(claims(aud=None)), id="no-audience"),
        pytest.param(lambda: sign(claims(nbf=int(time.time()) + 3600)), id="nbf-in-future"),
        pytest.param(lambda: jwt.encode(claims(), RSA_KEY, algorithm="RS256"), id="no-kid"),
        pytest.param(lambda: sign(claims(), kid="rsa-unknown"), id="unknown-kid"),
        pytest.param(_embedded_jwk, id="attacker-key-in-the-header"),
        pytest.param(_tampered, id="tampered-payload"),
        pytest.param(lambda: sign(claims(), EC_KEY, "ES256", "rsa-1"), id="alg-key-mismatch"),
        pytest.param(lambda: sign(claims(), rsa.generate_private_key(65537, 2048)), id="bad-sig"),
        pytest.param(lambda: sign(claims(sub="a/b")), id="odd-subject"),
        pytest.param(lambda: sign(claims(sub="user_1\n")), id="subject-with-newline"),
        pytest.param(lambda: sign(claims(exp=str(int(time.time()) + 60))), id="string-exp"),
        pytest.param(lambda: sign(claims(exp="9999999999")), id="far-string-exp"),
        pytest.param(lambda: sign(claims(iat=str(int(time.time())))), id="string-iat"),
        pytest.param(lambda: sign(claims(nbf=str(int(time.time())))), id="string-nbf"),
        pytest.param(lambda: sign(claims(exp=True)), id="boolean-exp"),
        pytest.param(lambda: sign(claims(exp=10**400)), id="exp-beyond-float"),
        pytest.param(lambda: sign(claims(exp=float("inf"))), id="infinite-exp"),
        pytest.param(lambda: sign(claims(pad="x" * 17_000)), id="token-over-16-kib"),
    ],
)
async def test_bad_tokens_are_unauthorized(verify, token):
    with pytest.raises(Unauthenticated, match="Unauthorized"):
        await verify(token())


async def test_numeric_time_claims_are_accepted(verify):
    now = time.time()
    token = sign(claims(iat=now - 1.5, nbf=int(now) - 1, exp=now + 60.25))
    assert (await verify(token)).user_id == "user_1"


async def test_leeway_is_capped_at_sixty_seconds(verify):
    # The verifier was configured with 600 s of leeway; a token 120 s past expiry still fails.
    with pytest.raises(Unauthenticated):
        await verify(sign(claims(exp=int(time.time()) - 120)))
    assert (await verify(sign(claims(exp=int(time.time()) - 30)))).user_id == "user_1"


async def test_keys_are_cached_and_unknown_kids_refetch_at_most_once_per_interval(server, verify):
    await verify(sign(claims()))
    await verify(sign(claims()))
    assert server.hits == 1
    rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server.publish(rotated, "rsa-2", "RS256")
    # Within the refetch interval an unknown kid is refused without hammering the provider.
    for _ in range(5):
        with pytest.raises(Unauthenticated):
            await verify(sign(claims(), rotated, kid="rsa-2"))
    assert server.hits == 1


async def test_a_rotated_key_is_picked_up_after_the_interval(server):
    server.publish(RSA_KEY, "rsa-1", "RS256")
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(
            http_jwks_fetcher(server.url, client), issuer=ISSUER, refetch_interval=0
        )
        await verifier.verify(sign(claims(aud=None, azp=None)))
        rotated = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        server.publish(rotated, "rsa-2", "RS256")
        identity = await verifier.verify(sign(claims(aud=None, azp=None), rotated, kid="rsa-2"))
    assert identity.user_id == "user_1" and server.hits == 2


async def test_an_unreachable_provider_means_unauthorized_not_a_crash():
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(
            http_jwks_fetcher("http://127.0.0.1:9/jwks.json", client), issuer=ISSUER
        )
        with pytest.raises(Unauthenticated):
            await verifier.verify(sign(claims()))


async def test_a_verified_token_is_remembered_until_it_expires(server, monkeypatch):
    server.publish(RSA_KEY, "rsa-1", "RS256")
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(http_jwks_fetcher(server.url, client), issuer=ISSUER)
        token = sign(claims(aud=None, azp=None, exp=int(time.time()) + 30))
        first = await verifier.verify(token)
        decodes = []
        original = jwt.decode
        monkeypatch.setattr(jwt, "decode", lambda *a, **k: decodes.append(1) or original(*a, **k))
        assert await verifier.verify(token) is first
        assert decodes == []
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + 31)
        await verifier.verify(token)
        # Past the token's expiry the cache no longer answers: the token is checked again.
        assert decodes == [1]


async def test_a_flood_of_unknown_kids_on_a_cold_cache_fetches_the_jwks_once(server):
    """200 distinct unknown key ids at once: one fetch (the first, which fills the cache);
    none of them forces another within the refetch interval."""
    server.publish(RSA_KEY, "rsa-1", "RS256")
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(http_jwks_fetcher(server.url, client), issuer=ISSUER)
        tokens = [sign(claims(aud=None, azp=None), kid=f"flood-{n}") for n in range(200)]
        outcomes = await asyncio.gather(
            *(verifier.verify(token) for token in tokens), return_exceptions=True
        )
        assert all(isinstance(outcome, Unauthenticated) for outcome in outcomes)
        assert server.hits == 1
        assert (await verifier.verify(sign(claims(aud=None, azp=None)))).user_id == "user_1"
    assert server.hits == 1


async def test_a_failing_provider_is_not_hammered_either(server):
    server.status = 503
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(http_jwks_fetcher(server.url, client), issuer=ISSUER)
        for n in range(50):
            with pytest.raises(Unauthenticated):
                await verifier.verify(sign(claims(aud=None, azp=None), kid=f"flood-{n}"))
    assert server.hits == 1


async def test_unusable_entries_of_the_jwks_are_skipped(server):
    """Entries no verifier could use (not an object, no key material, an HMAC secret) are
    dropped without a crash; the usable keys still verify, and an HMAC key is never one."""
    server.keys.extend(["not-a-key", 5, None, {"kty": "RSA", "kid": "broken"}])
    server.keys.append(
        {
            "kty": "oct",
            "k": "c3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3Nzc3M",
            "alg": "HS256",
            "kid": "hmac-1",
        }
    )
    server.publish(RSA_KEY, "rsa-1", "RS256")
    async with httpx.AsyncClient() as client:
        verifier = JwksTokenVerifier(http_jwks_fetcher(server.url, client), issuer=ISSUER)
        assert (await verifier.verify(sign(claims(aud=None, azp=None)))).user_id == "user_1"
        hmac_token = jwt.encode(
            claims(aud=None, azp=None), b"s" * 32, algorithm="HS256", headers={"kid": "hmac-1"}
        )
        with pytest.raises(Unauthenticated):
            await verifier.verify(hmac_token)
