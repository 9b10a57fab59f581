"""`IdentityDirectory` over Clerk's Backend API (`https://api.clerk.com/v1`, Bearer secret key).

Endpoints, as Clerk's OpenAPI document (clerk/openapi-specs, `bapi/2026-05-12.yml`) gives them:
`GET /organizations/{org}/memberships` (`limit`/`offset` paging, `user_id` filter; `{data,
total_count}`), `PATCH /organizations/{org}/memberships/{user}/metadata` (a deep merge in which
a key set to null is removed, at any level), `DELETE /organizations/{org}/memberships/{user}`,
`GET|POST /organizations/{org}/invitations`, `GET /organizations/{org}/invitations/{id}`,
`POST /organizations/{org}/invitations/{id}/revoke`, and `GET /users?user_id=...` for the
last sign-in and primary e-mail, which a membership does not carry. Times are Unix
milliseconds; errors are `{errors: [{code, message, long_message}]}`.

Clerk has no replace for membership metadata: a replacement reads the current object, then
patches the new one with every key that disappears (at any depth) set to null; arrays and
scalars are sent whole. The answer is compared with the intended object and, if a concurrent
write got in between, patched again from what Clerk answered. A JSON null inside an object
cannot be stored through a merge (it means "remove"), so such keys end up absent.

429 (after its `Retry-After`, which also pauses every other call of this directory), 408,
5xx, timeouts and connection errors are retried with backoff (`adapters.openai_gateway.retry`), then
end in `DirectoryUnavailable`, whose message names the HTTP status and Clerk's error code but
never the secret key or a response body. At most `max_concurrency` requests are in flight.
When an earlier attempt may have been carried out (a 5xx or timeout after sending), a
removal answered 404, a revocation answered "not pending" and an invitation answered
"duplicate" are read as that attempt's success. A list of an organization Clerk does not
know (404) is empty.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import httpx
import structlog

from adapters.identity import clerk_shapes as shapes
from adapters.openai_gateway.retry import GaveUp, Retryable, RetryPolicy, retry_after
from application.ports.identity_directory import DirectoryUnavailable
from domain.errors import Conflict
from domain.members import (
    INVITATION_PENDING,
    NOT_A_MEMBER,
    Invitation,
    InvitationStatus,
    Member,
    Outcome,
)

API_VERSION = "2026-05-12"  # Clerk-API-Version whose shapes this adapter reads
PAGE_SIZE = 100  # memberships and invitations per page; also Clerk's cap on user_id filters
CLERK_RETRY = RetryPolicy(max_attempts=4, backoff_base=0.5, backoff_max=8.0, max_retry_after=30.0)
_ERROR_CODE = re.compile(r"[a-z0-9_]{1,64}")
log = structlog.get_logger(__name__)


class ClerkDirectory:
    """The members and invitations of Clerk organizations, through its Backend API.

    `client` is shared and owned by the caller; `timeout` bounds each request; `retry` says how
    often a failed request is sent again; `max_concurrency` bounds the requests in flight (a
    bulk removal is one DELETE per member: Clerk has no bulk removal).
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        secret_key: str,
        base_url: str = "https://api.clerk.com",
        max_concurrency: int = 5,
        timeout: float = 10.0,
        retry: RetryPolicy = CLERK_RETRY,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1")
        self._client = client
        self._api = base_url.rstrip("/") + "/v1"
        self._headers = {
            "Authorization": f"Bearer {secret_key}",
            "Clerk-API-Version": API_VERSION,
            "Accept": "application/json",
        }
        self._slots = asyncio.Semaphore(max_concurrency)
        self._timeout = timeout
        self._retry = retry
        self._paused_until = 0.0

    # -- members --------------------------------------------------------------------------

    async def list_members(self, org_id: str) -> list[Member]:
        path = _path("organizations", org_id, "memberships")
        # Oldest first, so that a member who joins while we page only adds to the last page.
        members: dict[str, Member] = {}
        for member in await self._members(await self._pages(path, {"order_by": "+created_at"})):
            members.setdefault(member.id, member)
        return list(members.values())

    async def get_member(self, org_id: str, user_id: str) -> Member | None:
        page = await self._json(
            "GET",
            _path("organizations", org_id, "memberships"),
            params={"user_id": user_id, "limit": 10},
        )
        data = [
            m
            for m in shapes.as_list(shapes.as_dict(page).get("data"))
            if shapes.user_id_of(m) == user_id
        ]
        members = await self._members(data[:1])
        return members[0] if members else None

    async def replace_metadata(
        self, org_id: str, user_id: str, metadata: dict[str, Any]
    ) -> Member | None:
        before = await self.get_member(org_id, user_id)
        if before is None:
            return None
        wanted = shapes.without_nulls(metadata)
        current: Mapping[str, Any] = before.public_metadata
        path = _path("organizations", org_id, "memberships", user_id, "metadata")
        answer: dict[str, Any] | None = None
        for _ in range(3):
            patch = shapes.merge_patch(current, wanted)
            if answer is not None and not patch:
                break
            response, _ambiguous = await self._send("PATCH", path, json={"public_metadata": patch})
            if response.status_code == 404:
                return None
            answer = shapes.as_dict(self._body(response))
            current = shapes.as_dict(answer.get("public_metadata"))
            if shapes.same(current, wanted):
                break
        else:
            log.warning("clerk_metadata_replace_raced", org_id=org_id, user_id=user_id)
        assert answer is not None
        return shapes.member_of(answer, email=before.email, signed_in=before.last_sign_in_at)

    async def remove_member(self, org_id: str, user_id: str) -> bool:
        response, ambiguous = await self._send(
            "DELETE", _path("organizations", org_id, "memberships", user_id)
        )
        if response.status_code == 404:
            # After an attempt whose fate is unknown, "not a member" is that attempt's doing.
            return ambiguous
        self._body(response)
        return True

    async def remove_members(self, org_id: str, user_ids: Sequence[str]) -> list[Outcome]:
        """Clerk has no bulk removal: one call each, all at once (`_send` holds them to the
        concurrency bound)."""

        async def one(user_id: str) -> Outcome:
            try:
                removed = await self.remove_member(org_id, user_id)
            except DirectoryUnavailable as failure:
                return Outcome(id=user_id, error=failure.message)
            return Outcome(id=user_id, error=None if removed else NOT_A_MEMBER)

        return list(await asyncio.gather(*(one(user_id) for user_id in user_ids)))

    # -- invitations ----------------------------------------------------------------------

    async def create_invitation(
        self,
        org_id: str,
        *,
        email: str,
        role: str,
        inviter_user_id: str,
        expires_at: datetime,
    ) -> Invitation:
        if await self._pending_for(org_id, email):
            raise Conflict(INVITATION_PENDING)
        seconds = (expires_at - datetime.now(UTC)).total_seconds()
        body = {
            "email_address": email,
            "role": role,
            "inviter_user_id": inviter_user_id,
            "expires_in_days": min(max(round(seconds / 86400), 1), 365),
        }
        response, ambiguous = await self._send(
            "POST", _path("organizations", org_id, "invitations"), json=body
        )
        if response.status_code in (400, 409, 422):
            pending = await self._pending_for(org_id, email)
            if pending and ambiguous:
                return pending[0]  # our own earlier attempt went through
            if pending:
                raise Conflict(INVITATION_PENDING)
        return shapes.invitation_of(self._body(response))

    async def list_invitations(self, org_id: str) -> list[Invitation]:
        found = await self._invitations(org_id, {})
        return sorted(found, key=lambda invitation: invitation.created_at, reverse=True)

    async def revoke_invitation(self, org_id: str, invitation_id: str) -> bool:
        path = _path("organizations", org_id, "invitations", invitation_id)
        response, ambiguous = await self._send("POST", f"{path}/revoke", json={})
        if response.status_code == 404:
            return False
        if response.status_code in (400, 409, 422):
            # Only a pending invitation can be revoked: say which case this was.
            current, _ = await self._send("GET", path)
            if current.status_code == 404:
                return False
            status = shapes.invitation_of(self._body(current)).status
            if status is not InvitationStatus.PENDING:
                return ambiguous and status is InvitationStatus.REVOKED
        self._body(response)
        return True

    # -- helpers --------------------------------------------------------------------------

    async def _pending_for(self, org_id: str, email: str) -> list[Invitation]:
        found = await self._invitations(org_id, {"status": "pending", "email_address": email})
        return [
            i
            for i in found
            if i.status is InvitationStatus.PENDING and i.email.casefold() == email.casefold()
        ]

    async def _invitations(self, org_id: str, params: dict[str, Any]) -> list[Invitation]:
        path = _path("organizations", org_id, "invitations")
        found = [shapes.invitation_of(item) for item in await self._pages(path, params)]
        return list({invitation.id: invitation for invitation in found}.values())

    async def _pages(self, path: str, params: dict[str, Any]) -> list[Any]:
        """Every item of a paged list (`limit`/`offset`, `{data, total_count}`)."""
        items: list[Any] = []
        while True:
            page = shapes.as_dict(
                await self._json(
                    "GET", path, params={**params, "limit": PAGE_SIZE, "offset": len(items)}
                )
            )
            data = shapes.as_list(page.get("data"))
            items.extend(data)
            total = page.get("total_count")
            if len(data) < PAGE_SIZE or (isinstance(total, int) and len(items) >= total):
                return items

    async def _members(self, memberships: list[Any]) -> list[Member]:
        """Members of these memberships, with the last sign-in and primary e-mail of their
        users (one `GET /users` for up to 100)."""
        memberships = [m for m in memberships if shapes.user_id_of(m)]
        ids = [shapes.user_id_of(m) or "" for m in memberships]
        users: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), PAGE_SIZE):
            chunk = ids[start : start + PAGE_SIZE]
            answer = await self._json("GET", "/users", params={"user_id": chunk, "limit": 100})
            for user in shapes.as_list(answer):
                if isinstance(user, dict) and isinstance(user.get("id"), str):
                    users[user["id"]] = user
        members = []
        for membership in memberships:
            user = users.get(shapes.user_id_of(membership) or "", {})
            members.append(
                shapes.member_of(
                    membership,
                    email=shapes.primary_email(user),
                    signed_in=shapes.as_time(user.get("last_sign_in_at")),
                )
            )
        return members

    async def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer; an empty page when Clerk does not know the organization (404)."""
        response, _ = await self._send(method, path, **kwargs)
        if response.status_code == 404 and method == "GET":
            return {"data": [], "total_count": 0}
        return self._body(response)

    async def _send(self, method: str, path: str, **kwargs: Any) -> tuple[httpx.Response, bool]:
        """The first answer that is not worth retrying, and whether an earlier attempt may have
        been carried out by Clerk (5xx, timeout) without our knowing."""
        ambiguous = False

        async def attempt() -> httpx.Response:
            nonlocal ambiguous
            loop = asyncio.get_running_loop()
            async with self._slots:
                if (wait := self._paused_until - loop.time()) > 0:
                    await asyncio.sleep(wait)
                try:
                    response = await self._client.request(
                        method,
                        self._api + path,
                        headers=self._headers,
                        timeout=self._timeout,
                        **kwargs,
                    )
                except httpx.TransportError as failure:
                    sent = not isinstance(failure, httpx.ConnectError | httpx.ConnectTimeout)
                    ambiguous = ambiguous or sent
                    if isinstance(failure, httpx.TimeoutException):
                        raise Retryable("timed out") from None
                    raise Retryable(f"connection error: {type(failure).__name__}") from None
            status = response.status_code
            if status == 429:
                delay = retry_after(response.headers)
                if delay:
                    until = loop.time() + min(delay, self._retry.max_retry_after)
                    self._paused_until = max(self._paused_until, until)
                raise Retryable("HTTP 429", delay)
            if status == 408 or status >= 500:
                ambiguous = ambiguous or status != 503
                raise Retryable(f"HTTP {status}{_code(response)}", retry_after(response.headers))
            return response

        try:
            return await self._retry.run(attempt), ambiguous
        except GaveUp as failure:
            raise DirectoryUnavailable(
                f"Clerk is unavailable ({failure.message}; gave up after "
                f"{failure.attempts} attempts)"
            ) from None

    @staticmethod
    def _body(response: httpx.Response) -> Any:
        status = response.status_code
        if status == 401:
            raise DirectoryUnavailable("Clerk refused the secret key (HTTP 401)")
        if not 200 <= status < 300:
            raise DirectoryUnavailable(
                f"Clerk refused the request (HTTP {status}{_code(response)})"
            )
        try:
            return response.json()
        except ValueError:
            raise DirectoryUnavailable(f"Clerk answered HTTP {status} with no JSON") from None


def _path(*segments: str) -> str:
    """`/a/b/c` with every segment percent-encoded, so that an id never adds or removes one
    (`.` too: a URL parser would resolve a bare `..`)."""
    return "".join("/" + quote(segment, safe="").replace(".", "%2E") for segment in segments)


def _code(response: httpx.Response) -> str:
    """`: <code>` from Clerk's error body when it is a plain identifier; never the message."""
    try:
        errors = response.json().get("errors")
        code = errors[0].get("code")
    except (ValueError, AttributeError, TypeError, IndexError, KeyError):
        return ""
    return f": {code}" if isinstance(code, str) and _ERROR_CODE.fullmatch(code) else ""
