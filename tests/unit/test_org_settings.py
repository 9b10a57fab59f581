"""Organization settings: the domain's rules on a raw settings object, the stored document, the
nh3 sanitizer, and the two use cases with fakes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest

from adapters.html.nh3_sanitizer import Nh3HtmlSanitizer
from application.use_cases.get_org_settings import GetOrgSettings, GetOrgSettingsQuery
from application.use_cases.replace_org_settings import (
    ReplaceOrgSettings,
    ReplaceOrgSettingsCommand,
)
from domain.agents import NewAgent
from domain.audit import SETTINGS_SAVED
from domain.errors import Forbidden, Invalid
from domain.identity import ADMIN_ROLE, CONSOLE_ACCESS, Caller
from domain.org_settings import (
    LINK_URL,
    MAX_DETAILS,
    OrgSettings,
    SidebarLink,
    parse_settings,
    settings_from_document,
    unknown_default_agent,
)
from domain.spend import CapPeriod
from tests.fakes import FakeClock, FakeUnitOfWork
from tests.fakes.agents import FakeAgents
from tests.fakes.chat import FakeUsageLedger
from tests.fakes.members import FakeAuditLog
from tests.fakes.org_settings import FakeHtmlSanitizer, FakeOrgSettings


def fields_of(error: Invalid) -> list[str]:
    return [str(d["field"]) for d in error.details]


def breaches(value: Any) -> list[str]:
    with pytest.raises(Invalid) as raised:
        parse_settings(value)
    assert raised.value.message == "Bad Request"
    return fields_of(raised.value)


def test_an_empty_object_is_the_defaults():
    assert parse_settings({}) == OrgSettings()
    assert OrgSettings().document() == {
        "serviceAgent": False,
        "defaultAgentId": None,
        "spendCaps": {},
        "sidebarPinnedAppIds": [],
        "sidebarLinks": [],
        "feedbackModal": {"customHtml": ""},
    }


def test_a_whole_object_is_read_and_written_back_alike():
    raw = {
        "serviceAgent": True,
        "defaultAgentId": 7,
        "spendCaps": {"monthly": 0.1, "daily": 2},
        "sidebarPinnedAppIds": [5, 3],
        "sidebarLinks": [{"label": " Wiki ", "url": "https://[::1]:8443/w?q=1#x", "icon": "📘"}],
        "feedbackModal": {"customHtml": "<p>hi</p>"},
    }
    settings = parse_settings(raw)
    assert settings.spend_caps == {CapPeriod.DAILY: Decimal(2), CapPeriod.MONTHLY: Decimal("0.1")}
    assert list(settings.spend_caps) == [CapPeriod.DAILY, CapPeriod.MONTHLY]
    assert settings.sidebar_pinned_app_ids == (5, 3)
    assert settings.sidebar_links == (
        SidebarLink(label="Wiki", url="https://[::1]:8443/w?q=1#x", icon="📘"),
    )
    document = settings.document()
    assert document["spendCaps"] == {"daily": 2, "monthly": 0.1}
    assert settings_from_document(document) == settings
    assert parse_settings(document) == settings


def test_caps_are_exact_and_a_negative_zero_is_zero():
    caps = parse_settings({"spendCaps": {"daily": -0.0, "weekly": 1e9, "monthly": 12.345}})
    assert caps.spend_caps == {
        CapPeriod.DAILY: Decimal(0),
        CapPeriod.WEEKLY: Decimal(1_000_000_000),
        CapPeriod.MONTHLY: Decimal("12.345"),
    }
    assert caps.document()["spendCaps"] == {"daily": 0, "weekly": 1_000_000_000, "monthly": 12.345}


@pytest.mark.parametrize(
    ("raw", "fields"),
    [
        (None, ["settings"]),
        ("x", ["settings"]),
        ({"spendCaps": {"daily": -0.01}}, ["settings.spendCaps.daily"]),
        ({"spendCaps": {"daily": float("nan")}}, ["settings.spendCaps.daily"]),
        ({"spendCaps": {"daily": float("inf")}}, ["settings.spendCaps.daily"]),
        ({"spendCaps": {"daily": 10**9 + 1}}, ["settings.spendCaps.daily"]),
        ({"spendCaps": {"daily": False}}, ["settings.spendCaps.daily"]),
        ({"spendCaps": {"daily": "1"}}, ["settings.spendCaps.daily"]),
        (
            {"spendCaps": {"Daily": 1, "yearly": 2}},
            ["settings.spendCaps.Daily", "settings.spendCaps.yearly"],
        ),
        ({"serviceAgent": 1}, ["settings.serviceAgent"]),
        ({"serviceAgent": None}, ["settings.serviceAgent"]),
        ({"defaultAgentId": True}, ["settings.defaultAgentId"]),
        ({"defaultAgentId": 2**63}, ["settings.defaultAgentId"]),
        ({"defaultAgentId": 1.5}, ["settings.defaultAgentId"]),
        ({"sidebarPinnedAppIds": "1,2"}, ["settings.sidebarPinnedAppIds"]),
        ({"sidebarPinnedAppIds": [4, 4.0]}, ["settings.sidebarPinnedAppIds[1]"]),
        ({"sidebarPinnedAppIds": [True]}, ["settings.sidebarPinnedAppIds[0]"]),
        ({"sidebarLinks": {"label": "x"}}, ["settings.sidebarLinks"]),
        ({"sidebarLinks": ["https://x.com"]}, ["settings.sidebarLinks[0]"]),
        (
            {"sidebarLinks": [{"label": "   ", "url": "https://x.com", "icon": "\u202e"}]},
            ["settings.sidebarLinks[0].label", "settings.sidebarLinks[0].icon"],
        ),
        (
            {"sidebarLinks": [{"label": "a\x00", "url": "https://x.com"}]},
            ["settings.sidebarLinks[0].label"],
        ),
        ({"feedbackModal": "<p>"}, ["settings.feedbackModal"]),
        ({"feedbackModal": {"customHtml": "a\x00b"}}, ["settings.feedbackModal.customHtml"]),
        ({"feedbackModal": {"customHtml": "\ud800"}}, ["settings.feedbackModal.customHtml"]),
        ({"serviceagent": True}, ["settings.serviceagent"]),
    ],
)  # fmt: skip
def test_each_breach_names_its_field(raw, fields):
    assert breaches(raw) == fields


def test_a_missing_default_agent_is_named_as_a_breach_of_its_own():
    assert parse_settings({"defaultAgentId": 9}).default_agent_id == 9
    error = unknown_default_agent(9)
    assert error.message == "Bad Request"
    assert error.details == [
        {"field": "settings.defaultAgentId", "message": "9 is not an agent of this organization"}
    ]
    assert breaches({"defaultAgentId": "9", "spendCaps": {"daily": -1}}) == [
        "settings.defaultAgentId",
        "settings.spendCaps.daily",
    ]


def test_a_flood_of_breaches_is_answered_with_the_first_fifty():
    raw = {f"key{i}": i for i in range(10_000)}
    assert len(breaches(raw)) == MAX_DETAILS


@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "https://example.com/",
        "https://sub.example.co.uk:443/path/to?q=a%20b&x=1#frag",
        "https://xn--bcher-kva.example/",
        "http://localhost:8000",
        "http://192.168.0.1/admin",
        "https://[2001:db8::1]/",
        "https://example.com/@user",
        "https://example.com/ünïcödé",
    ],
)
def test_link_urls_that_are_taken(url):
    assert LINK_URL.fullmatch(url)


@pytest.mark.parametrize(
    "url",
    [
        "javascript:alert(1)",
        "JAVASCRIPT:alert(1)",
        " https://example.com",
        "https://example.com ",
        "data:text/html;base64,PHNjcmlwdD4=",
        "vbscript:msgbox",
        "//example.com/path",
        "https:example.com",
        "https://user:pass@example.com/",
        "https://good.example.com@evil.example.com",
        "https://good.example.com%40evil.example.com",
        "https://example.com\\evil",
        "https://exam ple.com",
        "https://example.com/a\tb",
        "https://example.com/\u202egnp.exe",
        "https://bücher.example/",
        "https://-bad-.example",
        "https://example.com:65536/",
        "https:///path",
        "",
    ],
)
def test_link_urls_that_are_refused(url):
    assert not LINK_URL.fullmatch(url)
    assert breaches({"sidebarLinks": [{"label": "x", "url": url}]}) == [
        "settings.sidebarLinks[0].url"
    ]


SANITIZED = [
    ("<p>Plain <b>bold</b> <em>it</em></p>", "<p>Plain <b>bold</b> <em>it</em></p>"),
    ("<script>alert(1)</script>ok", "ok"),
    ("<style>*{display:none}</style>ok", "ok"),
    ('<iframe src="https://x.com">inside</iframe>ok', "ok"),
    ('<img src=x onerror="alert(1)">ok', "ok"),
    ('<p onmouseover="alert(1)" style="color:red">ok</p>', "<p>ok</p>"),
    ('<a href="javascript:alert(1)">x</a>', '<a rel="noopener noreferrer">x</a>'),
    ('<a href=" JaVaScRiPt:alert(1)">x</a>', '<a rel="noopener noreferrer">x</a>'),
    ('<a href="data:text/html,hi">x</a>', '<a rel="noopener noreferrer">x</a>'),
    ('<a href="/relative">x</a>', '<a rel="noopener noreferrer">x</a>'),
    (
        '<a href="https://x.com" rel="opener" onclick="y()">x</a>',
        '<a href="https://x.com" rel="noopener noreferrer">x</a>',
    ),
    (
        '<a href="mailto:a@b.c">mail</a>',
        '<a href="mailto:a@b.c" rel="noopener noreferrer">mail</a>',
    ),
    ("<svg><script>alert(1)</script></svg>ok", "ok"),
    ("<!-- secret -->1 < 2 & 3", "1 &lt; 2 &amp; 3"),
    ("<form action=x><input name=q><button>go</button></form>", "go"),
    ("", ""),
]


@pytest.mark.parametrize(("html", "clean"), SANITIZED)
def test_the_nh3_sanitizer_keeps_formatting_and_nothing_that_runs(html, clean):
    sanitizer = Nh3HtmlSanitizer()
    assert sanitizer.sanitize(html) == clean
    assert sanitizer.sanitize(clean) == clean


ADMIN = Caller(user_id="user_admin", org_id="org_a", role=ADMIN_ROLE)
CONSOLE = Caller(user_id="user_c", org_id="org_a", permissions=frozenset({CONSOLE_ACCESS}))
MEMBER = Caller(user_id="user_m", org_id="org_a")
NOW = datetime(2026, 3, 4, 12, tzinfo=UTC)


@dataclass
class World:
    settings: FakeOrgSettings = field(default_factory=FakeOrgSettings)
    agents: FakeAgents = field(default_factory=FakeAgents)
    sanitizer: FakeHtmlSanitizer = field(default_factory=FakeHtmlSanitizer)
    audit: FakeAuditLog = field(default_factory=FakeAuditLog)
    # The ledger's fake answers `spent` too: it is a `SpendTotals`.
    ledger: FakeUsageLedger = field(default_factory=FakeUsageLedger)
    clock: FakeClock = field(default_factory=lambda: FakeClock(NOW))

    def __post_init__(self) -> None:
        self.uow = FakeUnitOfWork(self.settings, self.audit)

    def get(self) -> GetOrgSettings:
        return GetOrgSettings(self.settings, self.agents, self.ledger, self.clock)

    def replace(self) -> ReplaceOrgSettings:
        return ReplaceOrgSettings(
            self.settings, self.agents, self.sanitizer, self.audit, self.ledger, self.clock,
            self.uow,
        )  # fmt: skip

    async def agent(self, org: str = "org_a") -> int:
        new = NewAgent(org_id=org, user_id="u", name="A", description="", role="", model="m")
        return (await self.agents.add(new)).id


@pytest.fixture
def world() -> World:
    return World()


async def test_reading_needs_console_access(world):
    with pytest.raises(Forbidden):
        await world.get().execute(GetOrgSettingsQuery(caller=MEMBER))
    view = await world.get().execute(GetOrgSettingsQuery(caller=CONSOLE))
    assert view.settings == OrgSettings() and view.spend == []


async def test_only_admins_save(world):
    for caller in (MEMBER, CONSOLE):
        with pytest.raises(Forbidden):
            await world.replace().execute(
                ReplaceOrgSettingsCommand.parse(caller=caller, settings={})
            )
    assert world.settings.saved == {} and world.uow.commits == 0


async def test_a_save_is_sanitized_audited_and_committed(world):
    agent = await world.agent()
    raw = {
        "defaultAgentId": agent,
        "spendCaps": {"weekly": 5},
        "feedbackModal": {"customHtml": "<script>x</script>"},
    }
    view = await world.replace().execute(
        ReplaceOrgSettingsCommand.parse(caller=ADMIN, settings=raw)
    )
    assert world.sanitizer.given == ["<script>x</script>"]
    assert view.settings.custom_html == "x" and view.settings.default_agent_id == agent
    assert world.settings.saved["org_a"] == (view.settings, "user_admin")
    assert world.uow.commits == 1
    (entry,) = world.audit.of("org_a")
    assert (entry.action, entry.actor_user_id, entry.target_id) == (
        SETTINGS_SAVED,
        "user_admin",
        "org_a",
    )
    assert entry.details["changed"] == ["defaultAgentId", "spendCaps", "feedbackModal"]
    assert entry.details["after"]["spendCaps"] == {"weekly": 5}
    (status,) = view.spend
    assert (status.period, status.cap, status.spent) == (CapPeriod.WEEKLY, Decimal(5), Decimal(0))
    assert status.resets_at == datetime(2026, 3, 9, tzinfo=UTC)
    assert (await world.get().execute(GetOrgSettingsQuery(caller=ADMIN))).settings == view.settings


async def test_a_breach_or_a_foreign_agent_saves_nothing(world):
    foreign = await world.agent("org_b")
    for raw in ({"defaultAgentId": foreign}, {"spendCaps": {"daily": -1}}):
        with pytest.raises(Invalid) as raised:
            await world.replace().execute(
                ReplaceOrgSettingsCommand.parse(caller=ADMIN, settings=raw)
            )
        assert raised.value.message == "Bad Request"
    assert fields_of(raised.value) == ["settings.spendCaps.daily"]
    assert world.settings.saved == {} and world.audit.of("org_a") == []
    assert world.uow.commits == 0 and world.sanitizer.given == []
