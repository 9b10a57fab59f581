"""Request and response bodies of `/orgSettings` (agent-platform-api.md §2.3 and §4.8).

The request's `settings` is checked by the domain's own rules at the edge (`OrgSettingsBody.check`,
run by `validation.check_request` in place of field-by-field rules), so that every breach is
answered as the contract says: one 400 "Bad Request" with a `details` entry per breach, named by its
path. The types below state the same rules in the OpenAPI document.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, UnsetType

from application.use_cases.get_console_layout import ConsoleLayout
from application.use_cases.get_org_settings import OrgSettingsView
from domain.errors import Invalid, field_error
from domain.ids import MAX_BIGINT
from domain.org_settings import (
    LINK_URL,
    MAX_CAP,
    MAX_CUSTOM_HTML,
    MAX_LINK_ICON,
    MAX_LINK_LABEL,
    MAX_LINK_URL,
    MAX_PINNED_APPS,
    MAX_SIDEBAR_LINKS,
    OrgSettings,
    SidebarLink,
    parse_settings,
)
from domain.spend import CapPeriod, CapStatus
from entrypoints.http.rules import MALFORMED_BODY
from entrypoints.http.schemas import (
    NO_CONTROLS,
    NO_NUL,
    ONE_LINE,
    Camel,
    Closed,
    PositiveId,
    documented,
)

Cap = Annotated[
    float,
    Meta(
        ge=0,
        le=MAX_CAP,
        description="US dollars; absent: no cap",
        # Litestar leaves a zero minimum out of the document: state it again.
        extra_json_schema={"extra": {"minimum": 0}},
    ),
]
Label = Annotated[
    str,
    Meta(min_length=1, max_length=MAX_LINK_LABEL, extra_json_schema=documented(ONE_LINE)),
]
Url = Annotated[
    str,
    Meta(
        max_length=MAX_LINK_URL,
        description="An absolute http or https URL: an ASCII host (`xn--` for international "
        "names) or [IPv6], no user information, no spaces or control characters",
        extra_json_schema=documented(f"^{LINK_URL.pattern}$", examples=["https://example.com"]),
    ),
]
Icon = Annotated[str, Meta(max_length=MAX_LINK_ICON, extra_json_schema=documented(NO_CONTROLS))]
CustomHtml = Annotated[
    str,
    Meta(
        max_length=MAX_CUSTOM_HTML,
        description="HTML the console shows in its feedback modal; stored sanitized",
        extra_json_schema=documented(NO_NUL),
    ),
]
PinnedIds = Annotated[
    list[PositiveId],
    Meta(
        max_length=MAX_PINNED_APPS,
        description="Distinct app ids",
        extra_json_schema={
            "extra": {
                "items": {"type": "integer", "minimum": 1, "maximum": MAX_BIGINT},
                "uniqueItems": True,
            }
        },
    ),
]


class SpendCaps(Closed):
    daily: Cap | UnsetType = UNSET
    weekly: Cap | UnsetType = UNSET
    monthly: Cap | UnsetType = UNSET

    @classmethod
    def of(cls, settings: OrgSettings) -> SpendCaps:
        return cls(**{period.value: float(cap) for period, cap in settings.spend_caps.items()})


class SidebarLinkIn(Closed):
    label: Label
    url: Url
    icon: Icon = ""


class FeedbackModalIn(Closed):
    custom_html: CustomHtml = ""


class OrgSettingsIn(Closed):
    """The whole settings object; a key left out takes its default."""

    service_agent: bool = False
    default_agent_id: PositiveId | None = None
    spend_caps: SpendCaps = msgspec.field(default_factory=SpendCaps)
    sidebar_pinned_app_ids: PinnedIds = []
    sidebar_links: Annotated[list[SidebarLinkIn], Meta(max_length=MAX_SIDEBAR_LINKS)] = []
    feedback_modal: FeedbackModalIn = msgspec.field(default_factory=FeedbackModalIn)


def _check_settings(body: bytes) -> None:
    """The domain's check of `settings`, on the body as sent (whether a default agent exists
    is the use case's to say)."""
    try:
        decoded = msgspec.json.decode(body)
    except RecursionError:
        raise Invalid(MALFORMED_BODY, [field_error("body", "nested too deeply")]) from None
    except msgspec.DecodeError as error:  # valid JSON, but a number no double can hold
        raise Invalid(MALFORMED_BODY, [field_error("body", str(error))]) from None
    if isinstance(decoded, dict):
        parse_settings(decoded.get("settings"))


class OrgSettingsBody(Camel):
    check = staticmethod(_check_settings)

    settings: OrgSettingsIn


class SidebarLinkOut(Camel):
    label: str
    url: str
    icon: str

    @classmethod
    def each(cls, links: tuple[SidebarLink, ...]) -> list[SidebarLinkOut]:
        return [cls(label=link.label, url=link.url, icon=link.icon) for link in links]


class FeedbackModalOut(Camel):
    custom_html: str


class OrgSettingsOut(Camel):
    service_agent: bool
    default_agent_id: int | None
    spend_caps: SpendCaps
    sidebar_pinned_app_ids: list[int]
    sidebar_links: list[SidebarLinkOut]
    feedback_modal: FeedbackModalOut

    @classmethod
    def of(cls, settings: OrgSettings) -> OrgSettingsOut:
        return cls(
            service_agent=settings.service_agent,
            default_agent_id=settings.default_agent_id,
            spend_caps=SpendCaps.of(settings),
            sidebar_pinned_app_ids=list(settings.sidebar_pinned_app_ids),
            sidebar_links=SidebarLinkOut.each(settings.sidebar_links),
            feedback_modal=FeedbackModalOut(custom_html=settings.custom_html),
        )


class ConsoleLayoutResponse(Camel):
    """The settings every member's console shows (`GET /orgSettings/console`)."""

    default_agent_id: int | None
    sidebar_pinned_app_ids: list[int]
    sidebar_links: list[SidebarLinkOut]
    feedback_modal: FeedbackModalOut

    @classmethod
    def of(cls, layout: ConsoleLayout) -> ConsoleLayoutResponse:
        return cls(
            default_agent_id=layout.default_agent_id,
            sidebar_pinned_app_ids=list(layout.sidebar_pinned_app_ids),
            sidebar_links=SidebarLinkOut.each(layout.sidebar_links),
            feedback_modal=FeedbackModalOut(custom_html=layout.custom_html),
        )


class CapStatusOut(Camel):
    cap: Annotated[float, Meta(description="US dollars")]
    spent: Annotated[float, Meta(description="US dollars recorded in the current period")]
    remaining: Annotated[float, Meta(description="US dollars left, never below zero")]
    exceeded: Annotated[bool, Meta(description="Spent has reached the cap")]
    resets_at: Annotated[datetime, Meta(description="When the next period starts (UTC)")]

    @classmethod
    def of(cls, status: CapStatus) -> CapStatusOut:
        return cls(
            cap=float(status.cap),
            spent=float(status.spent),
            remaining=float(status.remaining),
            exceeded=status.exceeded,
            resets_at=status.resets_at,
        )


class SpendCapStatus(Camel):
    """One entry per period that has a cap: the UTC day, the ISO week, the UTC month."""

    daily: CapStatusOut | UnsetType = UNSET
    weekly: CapStatusOut | UnsetType = UNSET
    monthly: CapStatusOut | UnsetType = UNSET


class OrgSettingsResponse(Camel):
    settings: OrgSettingsOut
    spend_cap_status: SpendCapStatus

    @classmethod
    def of(cls, view: OrgSettingsView) -> OrgSettingsResponse:
        status = {s.period: CapStatusOut.of(s) for s in view.spend}
        return cls(
            settings=OrgSettingsOut.of(view.settings),
            spend_cap_status=SpendCapStatus(
                **{period.value: status[period] for period in CapPeriod if period in status}
            ),
        )
