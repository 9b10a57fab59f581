"""The console's own routes beside its files (`entrypoints.http.console`): the development sign-in
(`POST /console/sign-in`, which exists only while the service issues its own tokens) and the
sign-in page's address (`GET /console/sign-in`, the console's `index.html` like any of its
client-side routes). Both are public and outside the API's document (docs/api.md, "The
console")."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import jwt
from dishka import FromDishka
from litestar import Request, Response, post, route
from litestar.params import JSONBody
from litestar.response.base import ASGIResponse
from msgspec import Meta

from adapters.identity.dev_provider import DevIdentityProvider
from adapters.identity.jwks import ORG_ID_PATTERN
from domain.errors import Forbidden, NotFound
from domain.members import EMAIL, EMAIL_INVALID, MAX_EMAIL, MIN_EMAIL, USER_ID, USER_ID_INVALID
from entrypoints.config import Settings
from entrypoints.http.console import NO_STORE, SIGN_IN, security_headers, site_of
from entrypoints.http.injection import inject
from entrypoints.http.rules import Rule
from entrypoints.http.schemas import Camel

ORG_ID_INVALID = "orgId must be an organization identifier"
ROLE_INVALID = "role must be admin or member"
NOT_FROM_HERE = (
    "The development sign-in answers only on this machine (AP_CONSOLE_DEV_SIGN_IN=loopback): "
    "use the link serve printed, or a token from `agent-platform token`"
)
# `\Z`, not `$`: msgspec searches with `re`, where `$` also matches before a final newline.
UserId = Annotated[str, Meta(pattern=rf"^{USER_ID.pattern}\Z")]
OrgId = Annotated[str, Meta(pattern=ORG_ID_PATTERN.removesuffix("$") + r"\Z")]
Email = Annotated[
    str, Meta(min_length=MIN_EMAIL, max_length=MAX_EMAIL, pattern=rf"^(?:{EMAIL.pattern})\Z")
]


class SignInBody(Camel):
    """Who to be: a user id as the admin routes take them (`user_` and letters or digits), an
    organization id as tokens may carry them, a role and optionally an e-mail address."""

    rules = (
        Rule("userId", USER_ID_INVALID, detail="user_ followed by 1 to 64 letters or digits"),
        Rule(
            "orgId",
            ORG_ID_INVALID,
            detail="1 to 128 letters, digits or _.:@|+=-, starting with a letter or digit",
        ),
        Rule("role", ROLE_INVALID, detail="admin or member"),
        Rule("email", EMAIL_INVALID, detail="invalid"),
    )

    user_id: UserId
    org_id: OrgId
    role: Literal["admin", "member"]
    email: Email | None = None


class SignedIn(Camel):
    token: str
    expires_at: str


@post(SIGN_IN, include_in_schema=False, status_code=200, security=[])
@inject
async def sign_in(
    request: Request[Any, Any, Any],
    data: JSONBody[SignInBody],
    dev: FromDishka[DevIdentityProvider | None],
    settings: FromDishka[Settings],
) -> Response[SignedIn]:
    """A development token for whom the body names, valid `AP_CONSOLE_TOKEN_TTL` seconds."""
    if dev is None:  # registered only with the development provider; never signs otherwise
        raise NotFound("Not Found")
    if settings.console_dev_sign_in == "loopback" and not _on_this_machine(request):
        raise Forbidden(NOT_FROM_HERE)
    token = dev.issue(
        user_id=data.user_id,
        org_id=data.org_id,
        role=data.role,
        email=data.email,
        ttl=settings.console_token_ttl,
    )
    expires = jwt.decode(token, options={"verify_signature": False})["exp"]
    expires_at = datetime.fromtimestamp(expires, UTC).isoformat().replace("+00:00", "Z")
    return Response(
        SignedIn(token=token, expires_at=expires_at),
        headers={"Cache-Control": NO_STORE, **security_headers(site_of(request.scope).csp)},
    )


def _on_this_machine(request: Request[Any, Any, Any]) -> bool:
    """Whether the request's peer is a loopback address (behind a proxy on this machine, every
    client is: then the proxy must not forward this route)."""
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@route(SIGN_IN, http_method=["GET", "HEAD"], include_in_schema=False, security=[])
async def sign_in_page(request: Request[Any, Any, Any]) -> ASGIResponse:
    """The console's sign-in page is one of its client-side routes."""
    wanted = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in request.scope["headers"]}
    return site_of(request.scope).index(wanted).response(head=request.method == "HEAD")


def console_routes(settings: Settings) -> list[Any]:
    """The sign-in's routes, with the development identity provider only (without it, the
    files' mount answers `POST /console/sign-in` with 404)."""
    return [sign_in, sign_in_page] if settings.dev_identity else []
