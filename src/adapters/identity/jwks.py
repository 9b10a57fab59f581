"""Bearer-token verification against a JWKS, with pyjwt.

Only RS256 and ES256 are accepted (`none` and HMAC never are); `exp`, `iat` and `sub` are
required; `exp`, `iat` and `nbf` must be JSON numbers (pyjwt alone reads the string
`"9999999999"` as a date); the issuer must match, the audience and authorized party are
checked when configured, and clock leeway is capped at 60 seconds. Keys are fetched
asynchronously and cached; an unknown `kid` triggers at most one refetch per
`refetch_interval`. A token that verified is remembered for at most a minute (never past its
`exp`), so a client's burst of requests pays for one signature check. A token longer than
16 KiB is refused unread.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx
import jwt
import structlog

from adapters.identity.clerk_claims import identity_from_claims
from domain.errors import Unauthenticated
from domain.identity import Identity

ALGORITHMS = ("RS256", "ES256")
MAX_LEEWAY = 60
VERIFIED_CACHE_SIZE = 4096
VERIFIED_CACHE_TTL = 60.0
UNAUTHORIZED = "Unauthorized"
_ID = re.compile(r"^[A-Za-z0-9_.:@|+=-]{1,128}$")
# An organization id also names a storage prefix (`orgs/<id>/`): it starts with a letter or
# digit, so that `.` and `..` are never one.
ORG_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@|+=-]{0,127}$"
_ORG_ID = re.compile(ORG_ID_PATTERN)
TIME_CLAIMS = ("exp", "iat", "nbf")
MAX_TOKEN_LENGTH = 16 * 1024
log = structlog.get_logger(__name__)

JwksFetcher = Callable[[], Awaitable[Mapping[str, Any]]]


def http_jwks_fetcher(url: str, client: httpx.AsyncClient) -> JwksFetcher:
    async def fetch() -> Mapping[str, Any]:
        response = await client.get(url, timeout=5.0)
        response.raise_for_status()
        document = response.json()
        if not isinstance(document, Mapping) or not isinstance(document.get("keys"), list):
            raise ValueError("JWKS document has no keys")
        return document

    return fetch


def static_jwks_fetcher(document: Mapping[str, Any]) -> JwksFetcher:
    async def fetch() -> Mapping[str, Any]:
        return document

    return fetch


class JwksTokenVerifier:
    """`TokenVerifier` for tokens signed with keys of a JWKS."""

    def __init__(
        self,
        fetch_jwks: JwksFetcher,
        *,
        issuer: str,
        audience: Sequence[str] = (),
        authorized_parties: Sequence[str] = (),
        leeway: int = 5,
        cache_ttl: float = 600.0,
        refetch_interval: float = 30.0,
    ) -> None:
        self._fetch = fetch_jwks
        self._issuer = issuer
        self._audience = list(audience)
        self._authorized_parties = set(authorized_parties)
        self._leeway = max(0, min(leeway, MAX_LEEWAY))
        self._cache_ttl = cache_ttl
        self._refetch_interval = refetch_interval
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at = float("-inf")
        self._lock = asyncio.Lock()
        self._verified: dict[str, tuple[Identity, float]] = {}

    async def _refresh(self, *, force: bool) -> None:
        async with self._lock:
            age = time.monotonic() - self._fetched_at
            if age < self._refetch_interval or (not force and age < self._cache_ttl):
                return
            self._fetched_at = time.monotonic()
            try:
                document = await self._fetch()
            except Exception as error:
                log.warning("jwks.fetch_failed", error=str(error))
                return
            keys: dict[str, jwt.PyJWK] = {}
            for entry in document.get("keys", []):
                try:
                    key = jwt.PyJWK.from_dict(dict(entry))
                except (jwt.PyJWTError, TypeError, ValueError, KeyError):
                    continue  # not a key this verifier can use: the others still count
                if key.key_id and key.algorithm_name in ALGORITHMS:
                    keys[key.key_id] = key
            self._keys = keys

    async def _key(self, kid: str) -> jwt.PyJWK:
        await self._refresh(force=False)
        if kid not in self._keys:
            await self._refresh(force=True)
        try:
            return self._keys[kid]
        except KeyError:
            raise Unauthenticated(UNAUTHORIZED) from None

    async def verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN_LENGTH:
            raise Unauthenticated(UNAUTHORIZED)
        cached = self._verified.get(token)
        if cached is not None and time.time() < cached[1]:
            return cached[0]
        identity, expires = await self._verify(token)
        if len(self._verified) >= VERIFIED_CACHE_SIZE:
            self._verified.pop(next(iter(self._verified)))
        self._verified[token] = (identity, min(expires, time.time() + VERIFIED_CACHE_TTL))
        return identity

    async def _verify(self, token: str) -> tuple[Identity, float]:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise Unauthenticated(UNAUTHORIZED) from None
        algorithm, kid = header.get("alg"), header.get("kid")
        if algorithm not in ALGORITHMS or not isinstance(kid, str):
            raise Unauthenticated(UNAUTHORIZED)
        key = await self._key(kid)
        if key.algorithm_name != algorithm:
            raise Unauthenticated(UNAUTHORIZED)
        try:
            claims = jwt.decode(
                token,
                key=key.key,
                algorithms=[algorithm],
                issuer=self._issuer,
                audience=self._audience or None,
                leeway=self._leeway,
                options={
                    "require": ["exp", "iat", "sub", "iss"],
                    "verify_aud": bool(self._audience),
                },
            )
        except jwt.PyJWTError as error:
            log.info("auth.token_rejected", reason=type(error).__name__)
            raise Unauthenticated(UNAUTHORIZED) from None
        if not all(_is_time(claims, name) for name in TIME_CLAIMS):
            log.info("auth.token_rejected", reason="NonNumericTimeClaim")
            raise Unauthenticated(UNAUTHORIZED)
        azp = claims.get("azp")
        # Checked when present, as Clerk's SDK does (a token made for a backend has none); an
        # `azp` that is no string (a list, an object) is never an authorized party.
        if self._authorized_parties and azp is not None and not self._authorized(azp):
            raise Unauthenticated(UNAUTHORIZED)
        if not isinstance(claims.get("sub"), str) or not _ID.fullmatch(claims["sub"]):
            raise Unauthenticated(UNAUTHORIZED)
        identity = identity_from_claims(claims)
        if identity.org_id is not None and not _ORG_ID.fullmatch(identity.org_id):
            raise Unauthenticated(UNAUTHORIZED)
        return identity, float(claims["exp"])

    def _authorized(self, azp: Any) -> bool:
        return isinstance(azp, str) and azp in self._authorized_parties


def _is_time(claims: Mapping[str, Any], name: str) -> bool:
    """An absent claim, or a finite JSON number a float can hold (NumericDate, RFC 7519 §2)."""
    if name not in claims:
        return True
    value = claims[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False
