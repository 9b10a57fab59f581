"""A local stand-in for the part of Clerk's Backend API the Clerk directory uses.

It answers on loopback with the request and response shapes of Clerk's OpenAPI document
(clerk/openapi-specs `bapi/2026-05-12.yml`): organization memberships (`limit`/`offset` paging,
`user_id` filter, `{data, total_count}`), the membership-metadata PATCH that deep-merges and
removes a key set to null at any level, membership removal, organization invitations (list
with `status`/`email_address` filters, create, get, revoke) and `GET /users`. Times are Unix
milliseconds; errors are `{errors: [{code, message, long_message}], clerk_trace_id}`. The
error codes themselves are not in the published document; the ones used here
(`authentication_invalid`, `resource_not_found`, `duplicate_record`,
`organization_invitation_not_pending`, `form_param_value_invalid`) are stand-ins.

It checks the Bearer secret key, keeps everything in memory, and can be told to answer the
next N calls with 429 and `Retry-After`, or with 500/503, and to take `latency` seconds per
call. It records every request and the most requests it had in flight at once.
"""

from __future__ import annotations

import itertools
import json
import secrets
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

SECRET_KEY = "sk_test_" + "Kq3vX9pLm2Rt7Wz4Yb6Nc8Hd1Jf5Gs0a"
ADMIN_ROLE = "org:admin"


def now_ms() -> int:
    return int(time.time() * 1000)


def deep_merge(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Clerk's metadata merge: nested objects are merged, a key set to null is removed at any
    level, anything else (arrays included) replaces the old value."""
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        elif isinstance(value, dict):
            merged[key] = deep_merge({}, value)
        else:
            merged[key] = value
    return merged


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    body: Any
    authorization: str | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class Fault:
    status: int
    retry_after: str | None = None
    method: str | None = None
    after_work: bool = False  # do what was asked, then answer the fault anyway


@dataclass
class ClerkServer:
    secret_key: str = SECRET_KEY
    latency: float = 0.0
    memberships: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    invitations: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)
    organizations: set[str] = field(default_factory=set)
    requests: list[Recorded] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self.lock = threading.Lock()
        self._ids = itertools.count(1)
        self._clock = itertools.count(now_ms() - 10_000_000)
        self._last_created = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out as two writes: without this, each body waits for the
            # client's delayed acknowledgement (~40 ms) on top of the set latency.
            disable_nagle_algorithm = True

            def do_GET(self) -> None:
                server.handle(self)

            do_POST = do_PATCH = do_DELETE = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.01,), daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # -- what a test sets up and reads --------------------------------------------------------

    def add_organization(self, org_id: str) -> None:
        self.organizations.add(org_id)

    def add_member(
        self,
        org_id: str,
        user_id: str,
        *,
        email: str | None = None,
        first_name: str | None = "Ada",
        last_name: str | None = "Lovelace",
        role: str = "org:member",
        metadata: dict[str, Any] | None = None,
        last_sign_in_at: int | None = None,
    ) -> None:
        email = email or f"{user_id.lower()}@example.com"
        self.organizations.add(org_id)
        stamp = next(self._clock)
        self.users[user_id] = {
            "object": "user",
            "id": user_id,
            "first_name": first_name,
            "last_name": last_name,
            "primary_email_address_id": f"idn_{user_id}",
            "email_addresses": [
                {"object": "email_address", "id": f"idn_{user_id}", "email_address": email}
            ],
            "last_sign_in_at": last_sign_in_at,
            "created_at": stamp,
            "updated_at": stamp,
        }
        self.memberships.setdefault(org_id, {})[user_id] = {
            "object": "organization_membership",
            "id": f"orgmem_{next(self._ids):06d}",
            "role": role,
            "role_name": "Admin" if role in (ADMIN_ROLE, "admin") else "Member",
            "permissions": [],
            "public_metadata": dict(metadata or {}),
            "private_metadata": {},
            "organization": {"object": "organization", "id": org_id, "name": org_id},
            "public_user_data": {
                "user_id": user_id,
                "first_name": first_name,
                "last_name": last_name,
                "profile_image_url": "",
                "image_url": "https://img.clerk.com/x",
                "has_image": False,
                "identifier": email,
            },
            "created_at": stamp,
            "updated_at": stamp,
        }

    def metadata(self, org_id: str, user_id: str) -> dict[str, Any] | None:
        membership = self.memberships.get(org_id, {}).get(user_id)
        return None if membership is None else membership["public_metadata"]

    def fail_next(
        self,
        count: int,
        status: int,
        *,
        retry_after: str | None = None,
        method: str | None = None,
        after_work: bool = False,
    ) -> None:
        """Answer the next `count` calls (of `method`, if given) with `status`; `after_work`
        carries the call out first, as a gateway timing out behind Clerk would."""
        with self.lock:
            self.faults.extend(Fault(status, retry_after, method, after_work) for _ in range(count))

    def calls(self, method: str | None = None) -> list[Recorded]:
        return [r for r in self.requests if method is None or r.method == method]

    # -- the API ------------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length) if length else b""
        url = urlsplit(request.path)
        segments = [unquote(s) for s in url.path.split("/")[1:]]
        query = parse_qs(url.query, keep_blank_values=True)
        with self.lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.latency)
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw
            with self.lock:
                self.requests.append(
                    Recorded(
                        request.command,
                        url.path,
                        query,
                        body,
                        request.headers.get("Authorization"),
                    )
                )
                status, payload, headers = self._answer(request, segments, query, body)
        finally:
            with self.lock:
                self.in_flight -= 1
        data = json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/json")
        request.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(data)

    def _answer(
        self,
        request: BaseHTTPRequestHandler,
        segments: list[str],
        query: dict[str, list[str]],
        body: Any,
    ) -> tuple[int, Any, dict[str, str]]:
        if request.headers.get("Authorization") != f"Bearer {self.secret_key}":
            return error(401, "authentication_invalid", "Unauthorized request")
        fault = next((f for f in self.faults if f.method in (None, request.command)), None)
        if fault is not None:
            self.faults.remove(fault)
            if fault.after_work:
                self._route(request.command, segments, query, body)
            headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
            code = "too_many_requests" if fault.status == 429 else "internal_clerk_error"
            return (*error(fault.status, code, "Try again")[:2], headers)
        return self._route(request.command, segments, query, body)

    def _route(
        self, method: str, segments: list[str], query: dict[str, list[str]], body: Any
    ) -> tuple[int, Any, dict[str, str]]:
        if (
            segments[:2] == ["v1", "organizations"]
            and segments[2:3] != []
            and (segments[2] not in self.organizations)
        ):
            return not_found()
        match method, segments:
            case "GET", ["v1", "users"]:
                return self._users(query)
            case "GET", ["v1", "organizations", org, "memberships"]:
                return self._list_memberships(org, query)
            case "PATCH", ["v1", "organizations", org, "memberships", user, "metadata"]:
                return self._merge_metadata(org, user, body)
            case "DELETE", ["v1", "organizations", org, "memberships", user]:
                membership = self.memberships.get(org, {}).pop(user, None)
                if membership is None:
                    return not_found()
                return 200, membership, {}
            case "GET", ["v1", "organizations", org, "invitations"]:
                return self._list_invitations(org, query)
            case "POST", ["v1", "organizations", org, "invitations"]:
                return self._invite(org, body)
            case "GET", ["v1", "organizations", org, "invitations", invitation_id]:
                invitation = self.invitations.get(org, {}).get(invitation_id)
                return (200, invitation, {}) if invitation else not_found()
            case "POST", ["v1", "organizations", org, "invitations", invitation_id, "revoke"]:
                return self._revoke(org, invitation_id)
        return not_found()

    def _users(self, query: dict[str, list[str]]) -> tuple[int, Any, dict[str, str]]:
        wanted = query.get("user_id")
        if wanted is not None and len(wanted) > 100:
            return invalid("user_id")
        found = [u for uid, u in self.users.items() if wanted is None or uid in wanted]
        limit, offset = page_params(query)
        if limit is None or offset is None:
            return invalid("limit")
        return 200, found[offset : offset + limit], {}

    def _list_memberships(
        self, org: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        limit, offset = page_params(query)
        if limit is None or offset is None:
            return invalid("limit")
        rows = list(self.memberships.get(org, {}).values())
        wanted = query.get("user_id")
        if wanted is not None:
            rows = [m for m in rows if m["public_user_data"]["user_id"] in wanted]
        order = (query.get("order_by") or ["-created_at"])[0]
        rows.sort(key=lambda m: m["created_at"], reverse=order.startswith("-"))
        return 200, {"data": rows[offset : offset + limit], "total_count": len(rows)}, {}

    def _merge_metadata(self, org: str, user: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        membership = self.memberships.get(org, {}).get(user)
        if membership is None:
            return not_found()
        if not isinstance(body, dict) or set(body) - {"public_metadata", "private_metadata"}:
            return invalid("body")
        for name in ("public_metadata", "private_metadata"):
            if name in body:
                if not isinstance(body[name], dict):
                    return invalid(name)
                membership[name] = deep_merge(membership[name], body[name])
        membership["updated_at"] = now_ms()
        return 200, membership, {}

    def _list_invitations(
        self, org: str, query: dict[str, list[str]]
    ) -> tuple[int, Any, dict[str, str]]:
        limit, offset = page_params(query)
        if limit is None or offset is None:
            return invalid("limit")
        rows = list(self.invitations.get(org, {}).values())
        if statuses := query.get("status"):
            rows = [i for i in rows if i["status"] in statuses]
        if emails := query.get("email_address"):
            rows = [i for i in rows if i["email_address"].lower() in {e.lower() for e in emails}]
        rows.sort(key=lambda i: i["created_at"], reverse=True)
        return 200, {"data": rows[offset : offset + limit], "total_count": len(rows)}, {}

    def _invite(self, org: str, body: Any) -> tuple[int, Any, dict[str, str]]:
        if not isinstance(body, dict):
            return invalid("body")
        email, role = body.get("email_address"), body.get("role")
        if not isinstance(email, str) or "@" not in email:
            return invalid("email_address")
        if not isinstance(role, str) or not role:
            return invalid("role")
        days = body.get("expires_in_days")
        days = 30 if days is None else days
        if not isinstance(days, int) or not 1 <= days <= 365:
            return invalid("expires_in_days")
        existing = self.invitations.setdefault(org, {})
        if any(
            i["status"] == "pending" and i["email_address"].lower() == email.lower()
            for i in existing.values()
        ):
            return error(400, "duplicate_record", "There is already a pending invitation")
        created = self._last_created = max(now_ms(), self._last_created + 1)
        invitation_id = "orginv_" + secrets.token_hex(12)
        inviter = body.get("inviter_user_id")
        existing[invitation_id] = {
            "object": "organization_invitation",
            "id": invitation_id,
            "email_address": email,
            "role": role,
            "role_name": "Admin" if role == ADMIN_ROLE else "Member",
            "organization_id": org,
            "inviter_id": inviter,
            "public_inviter_data": None if inviter is None else {"user_id": inviter},
            "status": "pending",
            "public_metadata": {},
            "private_metadata": {},
            "url": None,
            "expires_at": created + days * 86_400_000,
            "created_at": created,
            "updated_at": created,
        }
        return 200, existing[invitation_id], {}

    def _revoke(self, org: str, invitation_id: str) -> tuple[int, Any, dict[str, str]]:
        invitation = self.invitations.get(org, {}).get(invitation_id)
        if invitation is None:
            return not_found()
        if invitation["status"] != "pending":
            return error(
                400,
                "organization_invitation_not_pending",
                "Only pending invitations can be revoked",
            )
        invitation["status"] = "revoked"
        invitation["updated_at"] = now_ms()
        return 200, invitation, {}


def page_params(query: dict[str, list[str]]) -> tuple[int | None, int | None]:
    """`limit` (1 to 500, default 10) and `offset` (from 0), or None where one is invalid."""
    try:
        limit = int((query.get("limit") or ["10"])[0])
        offset = int((query.get("offset") or ["0"])[0])
    except ValueError:
        return None, None
    return (limit if 1 <= limit <= 500 else None), (offset if offset >= 0 else None)


def error(status: int, code: str, message: str) -> tuple[int, Any, dict[str, str]]:
    body = {
        "errors": [{"code": code, "message": message, "long_message": f"{message}."}],
        "clerk_trace_id": secrets.token_hex(8),
    }
    return status, body, {}


def not_found() -> tuple[int, Any, dict[str, str]]:
    return error(404, "resource_not_found", "not found")


def invalid(param: str) -> tuple[int, Any, dict[str, str]]:
    return error(422, "form_param_value_invalid", f"{param} is invalid")


def running() -> Iterator[ClerkServer]:
    """A server for one test, shut down after it."""
    server = ClerkServer()
    try:
        yield server
    finally:
        server.close()
