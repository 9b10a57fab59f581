"""Who is acting: the token verifier, the identity a scope acts as (given as context by the
HTTP middleware, the CLI and the worker alike) and the member it is, provisioned just in time."""

from __future__ import annotations

import time

import httpx
from dishka import AsyncContainer, Provider, Scope, from_context, provide

from adapters.identity.dev_provider import DEV_ISSUER, DevIdentityProvider
from adapters.identity.jwks import JwksTokenVerifier, http_jwks_fetcher, static_jwks_fetcher
from adapters.postgres.database import OrgConnection
from adapters.postgres.members import PgMemberDirectory
from application.ports.member_directory import MemberDirectory
from application.ports.token_verifier import TokenVerifier
from application.use_cases.record_member_seen import RecordMemberSeen
from domain.errors import Forbidden
from domain.identity import NO_ORGANIZATION, Caller, Identity
from domain.members import removed_since
from entrypoints.config import Settings

MEMBER_RECORD_TTL = 300.0


class RecentlySeen:
    """Which identities were provisioned lately, so that a steady stream of requests by the
    same member does not write its record on every request."""

    def __init__(self, ttl: float = MEMBER_RECORD_TTL, limit: int = 10_000) -> None:
        self._ttl = ttl
        self._limit = limit
        self._seen: dict[Identity, float] = {}

    def is_fresh(self, identity: Identity) -> bool:
        seen_at = self._seen.get(identity)
        return seen_at is not None and time.monotonic() - seen_at < self._ttl

    def forget_all(self) -> None:
        self._seen.clear()

    def mark(self, identity: Identity) -> None:
        if len(self._seen) >= self._limit:
            self._seen.clear()
        self._seen[identity] = time.monotonic()


class IdentityProvider(Provider):
    """The verified identity of a scope comes from its context; resolving its `Caller`
    provisions the member once in a while (`RecentlySeen`)."""

    scope = Scope.APP
    identity = from_context(Identity, scope=Scope.REQUEST)
    members = provide(PgMemberDirectory, provides=MemberDirectory, scope=Scope.REQUEST)
    record_member_seen = provide(RecordMemberSeen, scope=Scope.REQUEST)

    @provide
    def recently_seen(self) -> RecentlySeen:
        return RecentlySeen()

    @provide
    def dev_identity(self, settings: Settings) -> DevIdentityProvider | None:
        return dev_identity_provider(settings) if settings.dev_identity else None

    @provide
    def token_verifier(
        self, settings: Settings, client: httpx.AsyncClient, dev: DevIdentityProvider | None
    ) -> TokenVerifier:
        if dev is not None:
            fetch = static_jwks_fetcher(dev.jwks())
            issuer = dev.issuer
        else:
            assert settings.auth_jwks_url and settings.auth_issuer
            fetch = http_jwks_fetcher(settings.auth_jwks_url, client)
            issuer = settings.auth_issuer
        return JwksTokenVerifier(
            fetch,
            issuer=issuer,
            audience=settings.auth_audience,
            authorized_parties=settings.auth_authorized_parties,
            leeway=settings.auth_leeway,
        )

    @provide(scope=Scope.REQUEST)
    async def caller(
        self,
        identity: Identity,
        seen: RecentlySeen,
        container: AsyncContainer,
        connection: OrgConnection,
        settings: Settings,
    ) -> Caller:
        caller = identity.as_caller()
        if removed_since(identity.issued_at, connection.removed_at, settings.auth_leeway):
            # Removed from the organization after this token was issued: access ends at once.
            raise Forbidden(NO_ORGANIZATION)
        if not seen.is_fresh(identity):
            # Resolved only when needed: most requests come from a member seen moments ago.
            await (await container.get(RecordMemberSeen)).execute(identity)
            seen.mark(identity)
        return caller


def dev_identity_provider(settings: Settings) -> DevIdentityProvider:
    return DevIdentityProvider(
        settings.data_dir.resolve() / "dev-idp" / "signing-key.pem",
        issuer=settings.auth_issuer or DEV_ISSUER,
    )
