"""An OpenID provider on loopback (tests/node/oidc_provider.mjs: panva's oidc-provider) and a
real `serve` that trusts it, for the console's OpenID Connect sign-in test.

The provider has one public client, the console (authorization code + PKCE, refresh tokens),
issues access tokens as RS256 JWTs for the audience `agent-platform-api` carrying Clerk v1
organization claims, and signs in the account `ada` (user `user_ada`, admin of `org_oidc`) on
a plain login page ("Username", "Sign in") followed by a consent page ("Allow")."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import secrets
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from tests.e2e.serving import Server

ROOT = Path(__file__).resolve().parents[2]
PROVIDER_SCRIPT = ROOT / "tests" / "node" / "oidc_provider.mjs"
PROVIDER_PACKAGE = ROOT / "tests" / "node" / "node_modules" / "oidc-provider" / "package.json"

CLIENT_ID = "agent-platform-console"
AUDIENCE = "agent-platform-api"
ACCESS_TOKEN_TTL = 20
"""Seconds: short, so that the test sees the console renew its token."""
LEEWAY = 5
"""The service's clock leeway (AP_AUTH_LEEWAY's default)."""
USER = "ada"
USER_ID = "user_ada"
ORG_ID = "org_oidc"
MEMBER = "grace"
"""Login name of `user_grace`, a member of `org_oidc`."""


@dataclass
class Provider:
    process: subprocess.Popen[bytes]
    issuer: str
    log_path: Path

    @property
    def token_endpoint(self) -> str:
        return f"{self.issuer}/token"

    def discovery(self) -> dict[str, Any]:
        response = httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=5)
        response.raise_for_status()
        return response.json()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


def start_provider(console_origin: str, log_path: Path, timeout: float = 20) -> Provider:
    """`node tests/node/oidc_provider.mjs` on a free loopback port, once it printed `READY`;
    fails loudly when node or the provider package is missing."""
    node = shutil.which("node")
    if node is None:
        raise RuntimeError("no `node` on PATH: the OpenID provider fixture runs under Node.js")
    if not PROVIDER_PACKAGE.is_file():
        raise RuntimeError(
            f"{PROVIDER_PACKAGE.parent} is missing: `npm ci --prefix tests/node` installs it "
            "(`make test` does)"
        )
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            [
                node,
                str(PROVIDER_SCRIPT),
                "--port",
                "0",
                "--console-origin",
                console_origin,
                "--client-id",
                CLIENT_ID,
                "--audience",
                AUDIENCE,
                "--access-token-ttl",
                str(ACCESS_TOKEN_TTL),
                "--exit-with-stdin",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            cwd=ROOT,
        )
    ready: list[str] = []
    # The first line, read on a thread so that a provider that never prints cannot hang the test.
    reader = threading.Thread(
        target=lambda: ready.append(process.stdout.readline().decode()) if process.stdout else None,
        daemon=True,
    )
    reader.start()
    reader.join(timeout)
    line = ready[0].strip() if ready else ""
    if not line.startswith("READY http://127.0.0.1:"):
        process.kill()
        process.wait(10)
        raise RuntimeError(
            f"the OpenID provider did not start (first line {line!r}):\n"
            + log_path.read_text(errors="replace")
        )
    return Provider(process, line.removeprefix("READY "), log_path)


@dataclass
class OidcService:
    provider: Provider
    server: Server

    @property
    def console_url(self) -> str:
        return f"{self.server.base}/console/"


@contextmanager
def oidc_service(data_dir: Path) -> Iterator[OidcService]:
    """The provider, then `serve` configured for it as a deployment would be."""
    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = Server(data_dir)
    for name in ("AP_PUBLIC_URL", "AP_DATABASE_URL", "AP_AUTH_AUDIENCE"):
        server.env.pop(name, None)
    provider = start_provider(server.base, data_dir.parent / "oidc-provider.log")
    try:
        jwks_uri = provider.discovery()["jwks_uri"]
        server.env.update(
            {
                "AP_AUTH_JWKS_URL": jwks_uri,
                "AP_AUTH_ISSUER": provider.issuer,
                "AP_AUTH_AUDIENCE": AUDIENCE,
                "AP_AUTH_AUTHORIZED_PARTIES": CLIENT_ID,
                "AP_CONSOLE_OIDC_CLIENT_ID": CLIENT_ID,
                # No model is asked anything here: none is loaded, nothing leaves loopback.
                "AP_LOCAL_MODEL_PRELOAD": "false",
                "AP_DEFAULT_CHAT_MODEL": "openai:gpt-4o-mini",
                "AP_DEFAULT_EMBEDDING_MODEL": "openai:text-embedding-3-small",
                "AP_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                "AP_OPENAI_API_KEY": "sk-unused",
            }
        )
        server.start()
        try:
            yield OidcService(provider, server)
        finally:
            server.stop()
    finally:
        provider.stop()


def claims(token: str) -> dict[str, Any]:
    """A JWT's payload, unverified (the service verifies; the test only reads)."""
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def is_jwt(value: str) -> bool:
    return re.fullmatch(r"eyJ[\w-]*\.[\w-]+\.[\w-]*", value) is not None


def code_flow(service: OidcService) -> dict[str, Any]:
    """The authorization code + PKCE flow as the console runs it, by hand with httpx: the
    provider's token response (access, ID and refresh tokens)."""
    issuer = service.provider.issuer
    redirect_uri = f"{service.server.base}/console/auth/callback"
    verifier = secrets.token_urlsafe(48)
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )
    with httpx.Client(timeout=10) as client:
        response = client.get(
            f"{issuer}/auth",
            params={
                "client_id": CLIENT_ID,
                "response_type": "code",
                "redirect_uri": redirect_uri,
                "scope": "openid profile email offline_access",
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "state": "s1",
                "nonce": "n1",
            },
        )
        response = _follow(client, response, redirect_uri)
        uid = re.search(r"/interaction/([\w-]+)/login", response.text)
        assert uid, response.text
        response = client.post(f"{issuer}/interaction/{uid[1]}/login", data={"login": USER})
        response = _follow(client, response, redirect_uri)
        uid = re.search(r"/interaction/([\w-]+)/confirm", response.text)
        assert uid, response.text
        response = client.post(f"{issuer}/interaction/{uid[1]}/confirm")
        callback = _follow(client, response, redirect_uri)
        assert isinstance(callback, str), callback.text
        query = parse_qs(urlsplit(callback).query)
        assert query["state"] == ["s1"] and query["iss"] == [issuer], callback
        tokens = client.post(
            f"{issuer}/token",
            data={
                "grant_type": "authorization_code",
                "code": query["code"][0],
                "redirect_uri": redirect_uri,
                "client_id": CLIENT_ID,
                "code_verifier": verifier,
            },
            headers={"Origin": service.server.base},
        )
        assert tokens.status_code == 200, tokens.text
        assert tokens.headers["access-control-allow-origin"] == service.server.base
        return tokens.json()


def _follow(client: httpx.Client, response: httpx.Response, stop_at: str) -> httpx.Response | str:
    """Follows the provider's redirects; the URL of the first one to `stop_at` (the console's
    callback, which the browser would load) instead of a response."""
    for _ in range(10):
        if response.status_code not in (302, 303):
            return response
        location = str(response.url.join(response.headers["location"]))
        if location.startswith(stop_at):
            return location
        response = client.get(location)
    raise AssertionError(f"too many redirects from {response.url}")
