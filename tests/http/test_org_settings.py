"""`GET` and `PUT /orgSettings` on real Postgres: defaults, whole replacement, every rule of
the contract with nothing saved on a breach, sanitized feedback HTML, the audit log, the
spend against each cap (with a fixed clock) and isolation between organizations."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from dishka import Provider, Scope, provide
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from application.ports.clock import Clock
from entrypoints.http.app import create_app
from tests.fakes.basics import FakeClock
from tests.http.chat_support import make_agent
from tests.http.conftest import forget_members

# A Wednesday: its ISO week began on Monday 23 November.
NOW = datetime(2026, 11, 25, 15, 30, tzinfo=UTC)
DEFAULTS = {
    "serviceAgent": False,
    "defaultAgentId": None,
    "spendCaps": {},
    "sidebarPinnedAppIds": [],
    "sidebarLinks": [],
    "feedbackModal": {"customHtml": ""},
}


class FixedClock(Provider):
    @provide(scope=Scope.APP)
    def clock(self) -> Clock:
        return FakeClock(NOW)


@pytest.fixture(scope="module")
async def clocked(settings, database) -> AsyncIterator[AsyncTestClient]:
    app = create_app(settings, database, FixedClock())
    async with AsyncTestClient(app=app) as client:
        client.ap_app = app  # type: ignore[attr-defined]
        yield client


@pytest.fixture
async def client(clocked, clean) -> AsyncTestClient:
    await forget_members(clocked)
    return clocked


@pytest.fixture
def admin(member):
    return member("org_a", "user_admin", "admin")


async def save(client, who, settings: Any) -> Any:
    return await client.put("/orgSettings", json={"settings": settings}, headers=who.headers)


async def read(client, who) -> dict[str, Any]:
    response = await client.get("/orgSettings", headers=who.headers)
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_organization_that_never_saved_gets_the_defaults(client, admin):
    assert await read(client, admin) == {"settings": DEFAULTS, "spendCapStatus": {}}


async def test_settings_are_saved_and_replaced_whole(client, admin, owner_engine):
    agent = await make_agent(client, admin)
    settings = {
        "serviceAgent": True,
        "defaultAgentId": agent["id"],
        "spendCaps": {"daily": 5, "monthly": 120.5},
        "sidebarPinnedAppIds": [3, 1, 2],
        "sidebarLinks": [
            {"label": "Handbook", "url": "https://intranet.example.com/handbook", "icon": "book"},
            {"label": " Status ", "url": "http://10.0.0.1:8080/status?x=1#top"},
        ],
        "feedbackModal": {"customHtml": "<p>Tell us <strong>everything</strong></p>"},
    }
    saved = await save(client, admin, settings)
    assert saved.status_code == 200, saved.text
    expected = {
        **settings,
        "sidebarLinks": [
            settings["sidebarLinks"][0],
            {"label": "Status", "url": "http://10.0.0.1:8080/status?x=1#top", "icon": ""},
        ],
    }
    assert saved.json()["settings"] == expected
    assert (await read(client, admin))["settings"] == expected
    async with owner_engine.connect() as connection:
        stored = (
            await connection.execute(
                text(
                    "SELECT settings, updated_by, jsonb_typeof(settings -> 'spendCaps' -> 'daily')"
                    " FROM org_settings WHERE org_id = 'org_a'"
                )
            )
        ).one()
    assert stored[0] == expected and stored[1:] == ("user_admin", "number")

    replaced = await save(client, admin, {"spendCaps": {"weekly": 0}})
    assert replaced.status_code == 200, replaced.text
    assert replaced.json()["settings"] == {**DEFAULTS, "spendCaps": {"weekly": 0}}
    assert (await read(client, admin))["settings"] == {**DEFAULTS, "spendCaps": {"weekly": 0}}


LINK = {"label": "Docs", "url": "https://docs.example.com"}


def link(**changes: Any) -> dict[str, Any]:
    return {"sidebarLinks": [{**LINK, **changes}]}


BAD_SETTINGS = [
    ({"spendCaps": {"daily": -1}}, ["settings.spendCaps.daily"]),
    ({"spendCaps": {"hourly": 5}}, ["settings.spendCaps.hourly"]),
    ({"spendCaps": {"weekly": "5"}}, ["settings.spendCaps.weekly"]),
    ({"spendCaps": {"monthly": True}}, ["settings.spendCaps.monthly"]),
    ({"spendCaps": {"monthly": 1e12}}, ["settings.spendCaps.monthly"]),
    ({"spendCaps": [5]}, ["settings.spendCaps"]),
    ({"spendCaps": None}, ["settings.spendCaps"]),
    ({"serviceAgent": "yes"}, ["settings.serviceAgent"]),
    ({"defaultAgentId": "abc"}, ["settings.defaultAgentId"]),
    ({"defaultAgentId": 0}, ["settings.defaultAgentId"]),
    ({"defaultAgentId": "7"}, ["settings.defaultAgentId"]),
    ({"sidebarPinnedAppIds": [1, 2, 1]}, ["settings.sidebarPinnedAppIds[2]"]),
    ({"sidebarPinnedAppIds": ["1"]}, ["settings.sidebarPinnedAppIds[0]"]),
    ({"sidebarPinnedAppIds": [0, -2]}, [f"settings.sidebarPinnedAppIds[{i}]" for i in (0, 1)]),
    ({"sidebarPinnedAppIds": list(range(1, 52))}, ["settings.sidebarPinnedAppIds"]),
    (link(url="javascript:alert(1)"), ["settings.sidebarLinks[0].url"]),
    (link(url="data:text/html,<script>alert(1)</script>"), ["settings.sidebarLinks[0].url"]),
    (link(url="https://good.example.com@evil.example.com/"), ["settings.sidebarLinks[0].url"]),
    (link(url="https://exa mple.com"), ["settings.sidebarLinks[0].url"]),
    (link(url="https://example.com/\n"), ["settings.sidebarLinks[0].url"]),
    (link(url="https://example.com\\@evil.com"), ["settings.sidebarLinks[0].url"]),
    (link(url="/relative/path"), ["settings.sidebarLinks[0].url"]),
    (link(url="ftp://example.com"), ["settings.sidebarLinks[0].url"]),
    (link(url="https://example.com:99999"), ["settings.sidebarLinks[0].url"]),
    (link(label=""), ["settings.sidebarLinks[0].label"]),
    (link(label="x" * 61), ["settings.sidebarLinks[0].label"]),
    (link(label="two\nlines"), ["settings.sidebarLinks[0].label"]),
    (link(icon="i" * 65), ["settings.sidebarLinks[0].icon"]),
    (link(target="_blank"), ["settings.sidebarLinks[0].target"]),
    ({"sidebarLinks": [LINK] * 21}, ["settings.sidebarLinks"]),
    ({"sidebarLinks": [{"label": "No address"}]}, ["settings.sidebarLinks[0].url"]),
    ({"feedbackModal": {"customHtml": "x" * 20_001}}, ["settings.feedbackModal.customHtml"]),
    ({"feedbackModal": {"customHtml": 5}}, ["settings.feedbackModal.customHtml"]),
    ({"feedbackModal": {"html": ""}}, ["settings.feedbackModal.html"]),
    ({"theme": "dark"}, ["settings.theme"]),
    (
        {"spendCaps": {"daily": -1, "weekly": "x"}, "sidebarLinks": [{**LINK, "url": "x"}]},
        ["settings.spendCaps.daily", "settings.spendCaps.weekly", "settings.sidebarLinks[0].url"],
    ),
]


@pytest.mark.parametrize(("sent", "fields"), BAD_SETTINGS)
async def test_every_breach_is_named_and_nothing_is_saved(client, admin, sent, fields):
    kept = {**DEFAULTS, "serviceAgent": True, "spendCaps": {"daily": 2}}
    assert (await save(client, admin, kept)).status_code == 200
    response = await save(client, admin, sent)
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["error"] == "Bad Request"
    assert [d["field"] for d in body["details"]] == fields
    assert all(d["message"] for d in body["details"])
    assert (await read(client, admin))["settings"] == kept


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "settings"), ({"settings": None}, "settings"), ({"settings": [1]}, "settings")],
)
async def test_the_settings_object_is_required(client, admin, body, field):
    response = await client.put("/orgSettings", json=body, headers=admin.headers)
    assert response.status_code == 400, response.text
    assert response.json() == {
        "error": "Bad Request",
        "details": [{"field": field, "message": response.json()["details"][0]["message"]}],
    }


@pytest.mark.parametrize(
    "raw",
    [
        b'{"settings": {"spendCaps": {"daily": 1e400}}}',
        b'{"settings": {}, "elsewhere": -1e400}',
        b'{"settings": {"spendCaps": {"daily": 1' + b"0" * 400 + b"}}}",
        b'{"settings": {"sidebarLinks": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        b'{"settings": {"theme": ' + b"[" * 100_000 + b"]" * 100_000 + b"}}",
        b'{"settings": {"feedbackModal": {"customHtml": "\\ud800"}}}',
        b'{"settings": {"sidebarLinks": [{"label": "a\\u0000", "url": "https://x.com"}]}}',
        b'{"settings": ',
        b"[]",
    ],
)
async def test_hostile_bodies_are_refused_and_never_a_server_error(client, admin, raw):
    headers = {**admin.headers, "Content-Type": "application/json"}
    response = await client.put("/orgSettings", content=raw, headers=headers)
    assert response.status_code == 400, response.text
    assert (await read(client, admin))["settings"] == DEFAULTS


async def test_the_default_agent_is_an_agent_of_the_organization(client, admin, member):
    theirs = await make_agent(client, member("org_b", "user_boss", "admin"))
    ours = await make_agent(client, admin)
    for agent_id in (theirs["id"], 999_999):
        response = await save(client, admin, {"defaultAgentId": agent_id})
        assert response.status_code == 400, response.text
        (detail,) = response.json()["details"]
        assert detail["field"] == "settings.defaultAgentId"
        assert detail["message"] == f"{agent_id} is not an agent of this organization"
    assert (await read(client, admin))["settings"] == DEFAULTS
    # Ids are JSON integers only: `4.0` is refused like `"4"` (CONTRACT.md).
    refused = await save(
        client, admin, {"defaultAgentId": float(ours["id"]), "sidebarPinnedAppIds": [4.0]}
    )
    assert refused.status_code == 400
    assert [d["field"] for d in refused.json()["details"]] == [
        "settings.defaultAgentId",
        "settings.sidebarPinnedAppIds[0]",
    ]
    accepted = await save(client, admin, {"defaultAgentId": ours["id"], "sidebarPinnedAppIds": [4]})
    assert accepted.status_code == 200, accepted.text
    assert accepted.json()["settings"]["defaultAgentId"] == ours["id"]
    assert accepted.json()["settings"]["sidebarPinnedAppIds"] == [4]


async def test_a_deleted_default_agent_reads_as_none(client, admin):
    agent = await make_agent(client, admin)
    assert (await save(client, admin, {"defaultAgentId": agent["id"]})).status_code == 200
    deleted = await client.delete(f"/agents?agentId={agent['id']}", headers=admin.headers)
    assert deleted.status_code == 200, deleted.text
    settings = (await read(client, admin))["settings"]
    assert settings == DEFAULTS
    assert (await save(client, admin, settings)).status_code == 200


async def test_who_may_read_and_who_may_save(client, admin, member):
    plain = member("org_a", "user_plain", "member")
    console = member("org_a", "user_console", "member", permissions=["org:console:access"])
    managers = member("org_a", "user_agents", "member", permissions=["org:agents:manage"])
    for who in (plain, managers):
        assert (await client.get("/orgSettings", headers=who.headers)).status_code == 403
    assert (await read(client, console))["settings"] == DEFAULTS
    for who in (plain, console, managers):
        refused = await save(client, who, {"serviceAgent": True})
        assert refused.status_code == 403, refused.text
        assert refused.json() == {"error": "Only organization admins may do this"}
    assert (await read(client, admin))["settings"] == DEFAULTS
    assert (await client.get("/orgSettings")).status_code == 401
    assert (await client.put("/orgSettings", json={"settings": {}})).status_code == 401
    assert (await client.post("/orgSettings", json={}, headers=admin.headers)).status_code == 405


async def test_feedback_html_is_stored_sanitized(client, admin):
    html = (
        '<p class="x" style="color:red" onclick="steal()">Thanks for <strong>helping</strong>'
        "<script>alert(1)</script></p><style>body{display:none}</style>"
        '<iframe src="https://evil.example.com">frame</iframe>'
        '<img src="x" onerror="alert(1)">'
        '<a href="javascript:alert(1)">bad</a> <a href="jav&#x09;ascript:alert(1)">worse</a> '
        '<a href="https://docs.example.com" target="_blank">docs</a>'
        "<ul><li><em>one</em></li></ul>"
    )
    saved = await save(client, admin, {"feedbackModal": {"customHtml": html}})
    assert saved.status_code == 200, saved.text
    stored = (await read(client, admin))["settings"]["feedbackModal"]["customHtml"]
    assert stored == saved.json()["settings"]["feedbackModal"]["customHtml"]
    for gone in ("script", "style", "iframe", "onclick", "onerror", "javascript", "alert", "<img"):
        assert gone not in stored.lower(), (gone, stored)
    assert "<p>Thanks for <strong>helping</strong></p>" in stored
    assert (
        '<a href="https://docs.example.com" target="_blank" rel="noopener noreferrer">docs</a>'
        in stored
    )
    assert "<ul><li><em>one</em></li></ul>" in stored


async def test_each_save_is_in_the_audit_log(client, admin):
    assert (await save(client, admin, {"spendCaps": {"daily": 3}})).status_code == 200
    html = "<p>hi</p>"
    second = {"spendCaps": {"daily": 4}, "feedbackModal": {"customHtml": html}}
    assert (await save(client, admin, second)).status_code == 200
    assert (await save(client, admin, {"spendCaps": {"daily": -4}})).status_code == 400
    log = await client.get("/admin/audit-log", headers=admin.headers)
    entries = [e for e in log.json()["entries"] if e["action"] == "settings.saved"]
    assert len(entries) == 2
    newest, oldest = entries
    assert (newest["actorUserId"], newest["targetType"], newest["targetId"]) == (
        "user_admin",
        "organization",
        "org_a",
    )
    assert oldest["details"] == {
        "changed": ["spendCaps"],
        "before": {"spendCaps": {}},
        "after": {"spendCaps": {"daily": 3}},
    }
    assert newest["details"]["changed"] == ["spendCaps", "feedbackModal"]
    assert newest["details"]["after"]["spendCaps"] == {"daily": 4}
    assert newest["details"]["after"]["feedbackModal"]["customHtmlLength"] == len(html)
    assert newest["details"]["before"]["feedbackModal"]["customHtmlLength"] == 0


async def spend(owner_engine, org: str, at: str, cost: str) -> None:
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO usage_events (org_id, user_id, purpose, model, input_tokens,"
                " output_tokens, cost_usd, created_at)"
                " VALUES (:org, 'user_x', 'chat', 'openai:gpt-4o', 10, 10, :cost, :at)"
            ),
            {"org": org, "cost": Decimal(cost), "at": datetime.fromisoformat(at)},
        )


async def test_spend_against_each_cap(client, admin, owner_engine):
    for at, cost in (
        ("2026-11-25T00:00:00+00:00", "0.75"),  # today, from its first instant
        ("2026-11-25T15:00:00+00:00", "0.50"),
        ("2026-11-23T00:00:00+00:00", "2.00"),  # Monday: this ISO week
        ("2026-11-22T23:59:59+00:00", "4.00"),  # Sunday: last week, this month
        ("2026-11-01T00:00:00+00:00", "8.00"),  # this month's first instant
        ("2026-10-31T23:59:59+00:00", "16.00"),  # last month
    ):
        await spend(owner_engine, "org_a", at, cost)
    await spend(owner_engine, "org_b", "2026-11-25T10:00:00+00:00", "32.00")
    caps = {"daily": 1, "weekly": 10, "monthly": 15.25}
    saved = await save(client, admin, {"spendCaps": caps})
    assert saved.status_code == 200, saved.text
    expected = {
        "daily": {
            "cap": 1,
            "spent": 1.25,
            "remaining": 0,
            "exceeded": True,
            "resetsAt": "2026-11-26T00:00:00Z",
        },
        "weekly": {
            "cap": 10,
            "spent": 3.25,
            "remaining": 6.75,
            "exceeded": False,
            "resetsAt": "2026-11-30T00:00:00Z",
        },
        "monthly": {
            "cap": 15.25,
            "spent": 15.25,
            "remaining": 0,
            "exceeded": True,
            "resetsAt": "2026-12-01T00:00:00Z",
        },
    }
    assert saved.json()["spendCapStatus"] == expected
    assert (await read(client, admin))["spendCapStatus"] == expected
    only_weekly = await save(client, admin, {"spendCaps": {"weekly": 10}})
    assert only_weekly.json()["spendCapStatus"] == {"weekly": expected["weekly"]}


async def test_an_organizations_settings_are_its_own(client, admin, member, owner_engine):
    theirs = member("org_b", "user_boss", "admin")
    assert (await save(client, admin, {"serviceAgent": True})).status_code == 200
    assert (await read(client, theirs))["settings"] == DEFAULTS
    assert (await save(client, theirs, {"spendCaps": {"daily": 1}})).status_code == 200
    assert (await read(client, admin))["settings"] == {**DEFAULTS, "serviceAgent": True}
    async with owner_engine.connect() as connection:
        rows = (
            await connection.execute(text("SELECT org_id FROM org_settings ORDER BY org_id"))
        ).all()
    assert [r[0] for r in rows] == ["org_a", "org_b"]


async def test_a_request_reads_spend_on_its_own_connection(settings, database, idp, clean):
    """With every pooled connection held by requests, a request that waited for a second
    connection would wait forever: a pool of one shows it."""
    app = create_app(dataclasses.replace(settings, database_pool_size=1), database)
    token = idp.issue(user_id="user_admin", org_id="org_pool", role="admin")
    headers = {"Authorization": f"Bearer {token}"}
    client = AsyncTestClient(app=app)
    await client.__aenter__()
    body = {"settings": {"spendCaps": {"daily": 1}}}
    saved = await asyncio.wait_for(client.put("/orgSettings", json=body, headers=headers), 20)
    assert saved.status_code == 200, saved.text
    read_back = await asyncio.wait_for(client.get("/orgSettings", headers=headers), 20)
    assert read_back.json()["spendCapStatus"]["daily"]["spent"] == 0
    # Closed only once answered: a connection stuck in a request would hold the pool's close.
    await client.__aexit__(None, None, None)


async def test_every_member_reads_what_the_console_shows_and_not_the_caps(client, admin, member):
    plain = member("org_a", "user_plain", "member")
    outsider = member("org_b", "user_other", "admin")
    agent = await make_agent(client, admin)
    saved = await save(
        client,
        admin,
        {
            "defaultAgentId": agent["id"],
            "spendCaps": {"daily": 5},
            "sidebarPinnedAppIds": [agent["id"], 999],
            "sidebarLinks": [{"label": "Wiki", "url": "https://wiki.example/", "icon": "book"}],
            "feedbackModal": {"customHtml": "<p onclick='x()'>Tell us</p>"},
        },
    )
    assert saved.status_code == 200, saved.text
    assert (await client.get("/orgSettings", headers=plain.headers)).status_code == 403

    response = await client.get("/orgSettings/console", headers=plain.headers)

    assert response.status_code == 200, response.text
    assert response.json() == {
        "defaultAgentId": agent["id"],
        "sidebarPinnedAppIds": [agent["id"], 999],
        "sidebarLinks": [{"label": "Wiki", "url": "https://wiki.example/", "icon": "book"}],
        "feedbackModal": {"customHtml": "<p>Tell us</p>"},
    }
    other = await client.get("/orgSettings/console", headers=outsider.headers)
    assert other.json() == {
        "defaultAgentId": None,
        "sidebarPinnedAppIds": [],
        "sidebarLinks": [],
        "feedbackModal": {"customHtml": ""},
    }
    deleted = await client.delete(f"/agents?agentId={agent['id']}", headers=admin.headers)
    assert deleted.status_code == 200, deleted.text
    after = await client.get("/orgSettings/console", headers=plain.headers)
    assert after.json()["defaultAgentId"] is None
