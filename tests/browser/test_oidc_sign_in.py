"""Signing in to the console with OpenID Connect against a real provider on loopback
(tests/node/oidc_provider.mjs): authorization code + PKCE, the API called with the provider's
access token, the token renewed with the refresh token once it expired, and signing out of
both the console and the provider.

One provider and one `serve` for the module; the access token lives 20 seconds, so the journey
waits past it (about 25 s of the test's time)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page, Request, Response, expect

from tests.browser.oidc_support import (
    ACCESS_TOKEN_TTL,
    AUDIENCE,
    CLIENT_ID,
    LEEWAY,
    MEMBER,
    ORG_ID,
    USER,
    USER_ID,
    OidcService,
    claims,
    code_flow,
    is_jwt,
    oidc_service,
)
from tests.browser.support import Guard, require_console

pytestmark = pytest.mark.xdist_group("oidc")

SIGN_IN = re.compile(r"^Sign in", re.IGNORECASE)
URL_SECRETS = ("code=", "state=", "access_token", "id_token", "refresh_token", "session_state")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OidcService]:
    require_console()
    with oidc_service(tmp_path_factory.mktemp("oidc") / "data") as running:
        yield running


def test_the_console_is_configured_for_the_provider(service: OidcService):
    """`/console/config.json` names the provider and the client; the console's CSP lets it
    reach the provider and post to it."""
    response = httpx.get(f"{service.server.base}/console/config.json", timeout=5)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["identityProvider"] == "oidc", body
    assert body["oidc"]["authority"] == service.provider.issuer, body
    assert body["oidc"]["clientId"] == CLIENT_ID, body
    assert "openid" in body["oidc"]["scope"].split(), body
    page = httpx.get(service.console_url, timeout=5)
    assert page.status_code == 200
    csp = _directives(page.headers.get("content-security-policy", ""))
    for directive in ("connect-src", "form-action"):
        assert service.provider.issuer in csp.get(directive, []), (directive, csp)
    # The development sign-in does not exist next to an external identity provider.
    assert httpx.post(f"{service.server.base}/console/sign-in", json={}).status_code in (404, 405)


def test_the_providers_access_token_is_what_the_api_accepts(service: OidcService):
    """The provider's access token (a JWT for the API) is accepted, its ID token is not (its
    audience is the client), and the claims give the user, organization and role."""
    tokens = code_flow(service)
    access = claims(tokens["access_token"])
    assert access["iss"] == service.provider.issuer
    assert access["aud"] == AUDIENCE and access["azp"] == CLIENT_ID
    assert (access["sub"], access["org_id"], access["org_role"]) == (USER_ID, ORG_ID, "org:admin")
    assert access["exp"] - access["iat"] == ACCESS_TOKEN_TTL
    assert tokens["refresh_token"], "no refresh token for the console"
    base = service.server.base
    bearer = {"Authorization": f"Bearer {tokens['access_token']}"}
    settings = httpx.get(f"{base}/orgSettings", headers=bearer, timeout=10)
    assert settings.status_code == 200, settings.text  # admin-only: the role came through
    id_bearer = {"Authorization": f"Bearer {tokens['id_token']}"}
    assert httpx.get(f"{base}/kb/manage", headers=id_bearer, timeout=10).status_code == 401


@dataclass
class Traffic:
    """What the page sent: the provider's token grants and their answers, the API's requests
    with the bearer they carried and the status they got, cookies the console's origin set."""

    service: OidcService
    grants: list[tuple[str, Request]] = field(default_factory=list)
    api: list[tuple[str, str, int]] = field(default_factory=list)
    """(path, bearer token, status) of each API call the console made."""
    token_answers: list[Response] = field(default_factory=list)
    token_bodies: list[dict[str, Any]] = field(default_factory=list)
    console_answers: list[Response] = field(default_factory=list)
    navigations: list[str] = field(default_factory=list)

    def watch(self, page: Page) -> None:
        page.on("request", self._on_request)
        page.on("response", self._on_response)
        page.on(
            "framenavigated",
            lambda frame: self.navigations.append(frame.url) if frame == page.main_frame else None,
        )

    def _on_request(self, request: Request) -> None:
        if request.url.split("?")[0] == self.service.provider.token_endpoint:
            body = parse_qs(request.post_data or "")
            self.grants.append((body.get("grant_type", [""])[0], request))

    def _on_response(self, response: Response) -> None:
        url = response.url
        if url.startswith(self.service.server.base):
            self.console_answers.append(response)
            auth = response.request.headers.get("authorization", "")
            if auth.startswith("Bearer "):
                path = urlsplit(url).path
                self.api.append((path, auth.removeprefix("Bearer "), response.status))
        elif url.split("?")[0] == self.service.provider.token_endpoint and response.ok:
            self.token_answers.append(response)  # read later: no blocking call in a handler

    def token_responses(self) -> list[dict[str, Any]]:
        """The token endpoint's answers so far, as read before each navigation (a page that was
        navigated away from no longer has its bodies: one in flight then may be missed)."""
        answers, self.token_answers = self.token_answers, []
        for answer in answers:
            with contextlib.suppress(PlaywrightError):
                self.token_bodies.append(answer.json())
        return self.token_bodies

    def console_cookies(self) -> list[str]:
        """The cookies the console's origin set (`Response.headers` leaves them out)."""
        return [
            f"{answer.url}: {cookie}"
            for answer in self.console_answers
            if (cookie := answer.header_value("set-cookie"))
        ]

    def refreshes(self) -> list[Request]:
        return [request for grant, request in self.grants if grant == "refresh_token"]

    def failed_api_calls(self) -> list[tuple[str, int]]:
        return [(path, status) for path, _token, status in self.api if status >= 400]


def test_sign_in_renewal_and_sign_out(service: OidcService, guard: Guard):
    traffic = Traffic(service)
    page = guard.new_page()
    traffic.watch(page)

    # Signed out: the console offers the provider's sign-in, not the development page.
    page.goto(service.console_url)
    sign_in = page.get_by_role("button", name=SIGN_IN)
    expect(sign_in).to_be_visible()
    expect(page.get_by_label("Organization", exact=True)).to_have_count(0)
    sign_in.click()

    # The provider's own pages: login, then consent.
    page.wait_for_url(f"{service.provider.issuer}/interaction/**")
    page.get_by_label("Username").fill(USER)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Authorize")).to_be_visible()
    page.get_by_role("button", name="Allow").click()

    # Back on the console, signed in as the provider's user, with the code out of the URL.
    page.wait_for_url(f"{service.server.base}/console/**")
    expect(page.get_by_label("Message", exact=True)).to_be_visible()
    expect(page.get_by_text(USER_ID).first).to_be_visible()
    _assert_clean_url(page.url)
    assert [grant for grant, _ in traffic.grants][:1] == ["authorization_code"], traffic.grants
    first = traffic.token_responses()[0]
    assert is_jwt(first["access_token"]) and first.get("refresh_token"), first.keys()
    first_claims = claims(first["access_token"])
    assert first_claims["sub"] == USER_ID and first_claims["aud"] == AUDIENCE

    # The console's API calls carry the provider's access token, and succeed.
    expect(page.get_by_label("Agent", exact=True)).to_be_visible()
    _wait_for(page, lambda: traffic.api, "no API call with a bearer token")
    assert traffic.api[0][1] == first["access_token"] or traffic.api[0][1] in {
        r["access_token"] for r in traffic.token_responses()
    }, "the API was called with something else than the provider's access token"
    assert not traffic.failed_api_calls(), traffic.failed_api_calls()

    # A reload keeps the session (session storage) and its renewal going.
    traffic.token_responses()
    page.reload()
    expect(page.get_by_label("Message", exact=True)).to_be_visible()
    expect(page.get_by_text(USER_ID).first).to_be_visible()

    # Past the first access token's expiry (and the service's leeway): renewed with the refresh
    # token, and the console still works.
    expired_at = first_claims["exp"] + LEEWAY + 1
    page.wait_for_timeout(max(0.0, expired_at - time.time()) * 1000)
    refreshes = len(traffic.refreshes())
    assert refreshes, f"no refresh_token grant in {ACCESS_TOKEN_TTL + LEEWAY + 1} s"
    # The console renews 10 s before expiry (console/src/auth/session.ts), so with a 20 s token
    # about every 10 s; a tight loop would be many more.
    assert refreshes <= 3 * (ACCESS_TOKEN_TTL + LEEWAY + 1), f"{refreshes} refresh grants"
    for request in traffic.refreshes():
        response = request.response()
        assert response is not None and response.ok, (response and response.status, request)
    calls_before = len(traffic.api)
    page.get_by_role("link", name="Knowledge").first.click()
    expect(page.get_by_role("heading", name="Knowledge bases", exact=True)).to_be_visible()
    _wait_for(page, lambda: len(traffic.api) > calls_before, "no API call after the renewal")
    later = traffic.api[calls_before:]
    assert all(token != first["access_token"] for _, token, _ in later), (
        "the console still sends the expired access token"
    )
    assert all(claims(token)["exp"] > time.time() for _, token, _ in later)
    assert not traffic.failed_api_calls(), traffic.failed_api_calls()
    expect(page.get_by_role("alert")).to_have_count(0)
    expect(page.get_by_text(USER_ID).first).to_be_visible()
    _assert_clean_url(page.url)

    # No token in a cookie (none set by the console's origin, none holding a token), nor in
    # local storage: they stay in memory and session storage.
    tokens = {t for r in traffic.token_responses() for t in r.values() if isinstance(t, str)}
    tokens |= {token for _, token, _ in traffic.api}
    assert len(traffic.console_answers) > 10, traffic.console_answers
    assert not traffic.console_cookies(), traffic.console_cookies()
    for cookie in page.context.cookies(service.server.base):
        value = cookie["value"]
        assert value not in tokens and not is_jwt(value), f"a token in cookie {cookie['name']}"
    _assert_no_token_in(page, "localStorage", tokens)

    # Sign out: out of the provider too, back on the console's signed-out page.
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_url(f"{service.provider.issuer}/session/end**")
    page.get_by_role("button", name="Yes, sign me out").click()
    page.wait_for_url(f"{service.server.base}/console/**")
    expect(page.get_by_role("button", name=SIGN_IN)).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_have_count(0)
    _assert_no_token_in(page, "sessionStorage", tokens)
    _assert_no_token_in(page, "localStorage", tokens)
    _assert_clean_url(page.url)

    # A reload stays signed out; a page of the console asks for a sign-in, the provider asks
    # for a login again (its session ended), and the console returns to that page.
    page.reload()
    expect(page.get_by_role("button", name=SIGN_IN)).to_be_visible()
    expect(page.get_by_label("Message", exact=True)).to_have_count(0)
    page.goto(f"{service.server.base}/console/knowledge")
    page.get_by_role("button", name=SIGN_IN).click()
    page.wait_for_url(f"{service.provider.issuer}/interaction/**")
    page.get_by_label("Username").fill(USER)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(f"{service.server.base}/console/knowledge")
    expect(page.get_by_role("heading", name="Knowledge bases", exact=True)).to_be_visible()
    expect(page.get_by_text(USER_ID).first).to_be_visible()
    for url in traffic.navigations:
        if url.startswith(service.server.base) and "/console/auth/callback" not in url:
            _assert_clean_url(url)
    guard.check()


def test_denying_consent_leaves_the_console_signed_out(service: OidcService, guard: Guard):
    """The provider answers the callback with `access_denied`: the console says so, keeps no
    token, and offers the sign-in again."""
    page = guard.new_page()
    page.goto(service.console_url)
    page.get_by_role("button", name=SIGN_IN).click()
    page.wait_for_url(f"{service.provider.issuer}/interaction/**")
    page.get_by_label("Username").fill(MEMBER)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("button", name="Deny").click()

    page.wait_for_url(f"{service.server.base}/console/**")
    expect(page.get_by_role("alert")).to_contain_text("cancelled")
    expect(page.get_by_label("Message", exact=True)).to_have_count(0)
    _assert_no_token_in(page, "sessionStorage", set())
    page.get_by_role("link", name="Back to sign-in").click()
    expect(page.get_by_role("button", name=SIGN_IN)).to_be_visible()
    guard.check()


def _assert_no_token_in(page: Page, storage: str, tokens: set[str]) -> None:
    """Nothing in `storage` (sessionStorage, localStorage) is or holds a token, and no
    oidc-client-ts user (`oidc.user:…`) is kept there."""
    stored = page.evaluate(f"() => Object.entries({storage})")
    kept = [
        key
        for key, value in stored
        if key.startswith("oidc.user:")
        or is_jwt(value)
        or any(token in value for token in tokens)
        or re.search(r"eyJ[\w-]{10,}\.[\w-]{10,}\.", value)
    ]
    assert not kept, f"{storage} keeps tokens under {kept}"


def _assert_clean_url(url: str) -> None:
    parts = urlsplit(url)
    rest = f"{parts.query}#{parts.fragment}"
    assert not any(secret in rest for secret in URL_SECRETS), f"the address keeps {url}"
    assert not parts.path.startswith("/console/auth/callback"), url


def _wait_for(page: Page, condition: Any, message: str, within: float = 10) -> None:
    """Polls `condition` while Playwright runs (its events arrive only inside its calls)."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, message
        page.wait_for_timeout(100)


def _directives(policy: str) -> dict[str, list[str]]:
    directives: dict[str, list[str]] = {}
    for part in policy.split(";"):
        name, *values = part.split()
        if name:
            directives[name] = values
    return directives
