"""An organization's settings (agent-platform-api.md §2.3): the service agent switch, the default
agent, spend caps, the console sidebar's pinned apps and links, and the feedback modal's HTML.

The settings are one JSON object, saved and replaced whole; a key left out takes its default.
Validation reads the decoded JSON as sent and names every breach in `details`, each with its
path (`settings.spendCaps.daily`, `settings.sidebarLinks[2].url`), under the contract's
message "Bad Request". Keys the contract does not name are refused, so that a misspelt one
(`spendcaps`) is not silently dropped. The stored document is the same camelCase object, caps
as JSON numbers: the spend reservation (migration 0009) reads `spendCaps` from it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from domain.errors import Forbidden, Invalid, field_error
from domain.identity import CONSOLE_ACCESS, Caller
from domain.ids import MAX_BIGINT, NOT_A_JSON_INTEGER, written_otherwise
from domain.spend import CapPeriod
from domain.text import (
    INVISIBLE,
    SPACES,
    character_class,
    check_single_line,
    check_storable,
    is_storable,
)

BAD_REQUEST = "Bad Request"
CONSOLE_ACCESS_REQUIRED = "Administrative console access required"
MAX_CAP = 1_000_000_000
"""The largest cap, in US dollars: anything above is a typing slip, not a budget."""
MAX_PINNED_APPS = 50
MAX_SIDEBAR_LINKS = 20
MAX_LINK_LABEL = 60
MAX_LINK_ICON = 64
MAX_LINK_URL = 2048
MAX_CUSTOM_HTML = 20_000
MAX_DETAILS = 50
"""A body with thousands of breaches is answered with the first fifty."""

_HOST_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_PORT = r"6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}|0"
LINK_URL = re.compile(
    rf"https?://(?:{_HOST_LABEL}(?:\.{_HOST_LABEL})*|\[[0-9A-Fa-f:.]{{2,45}}\])(?::(?:{_PORT}))?"
    rf"(?:[/?#][^{character_class(INVISIBLE, SPACES)}\\]*)?"
)
"""An absolute http(s) URL: an ASCII host name (internationalized names in their `xn--` form)
or a bracketed IPv6 address, an optional port, then a path, query or fragment without spaces,
control or invisible characters or backslashes. No user information (`user@host`), so a link
cannot show one host and open another."""

FIELD = "settings"
KEYS = frozenset(
    {
        "serviceAgent",
        "defaultAgentId",
        "spendCaps",
        "sidebarPinnedAppIds",
        "sidebarLinks",
        "feedbackModal",
    }
)
LINK_KEYS = frozenset({"label", "url", "icon"})
MODAL_KEYS = frozenset({"customHtml"})


@dataclass(frozen=True, slots=True, kw_only=True)
class SidebarLink:
    """A link the console shows in its sidebar."""

    label: str
    url: str
    icon: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class OrgSettings:
    """An organization's settings; the defaults are those of an organization that never saved.
    `spend_caps` holds only the periods that have a cap, in US dollars."""

    service_agent: bool = False
    default_agent_id: int | None = None
    spend_caps: Mapping[CapPeriod, Decimal] = field(default_factory=dict)
    sidebar_pinned_app_ids: tuple[int, ...] = ()
    sidebar_links: tuple[SidebarLink, ...] = ()
    custom_html: str = ""

    def document(self) -> dict[str, Any]:
        """The settings as the contract's JSON object (caps as numbers)."""
        return {
            "serviceAgent": self.service_agent,
            "defaultAgentId": self.default_agent_id,
            "spendCaps": {p.value: _number(c) for p, c in sorted_caps(self.spend_caps).items()},
            "sidebarPinnedAppIds": list(self.sidebar_pinned_app_ids),
            "sidebarLinks": [
                {"label": link.label, "url": link.url, "icon": link.icon}
                for link in self.sidebar_links
            ],
            "feedbackModal": {"customHtml": self.custom_html},
        }


def sorted_caps(caps: Mapping[CapPeriod, Decimal]) -> dict[CapPeriod, Decimal]:
    """`caps` in `CapPeriod` order (daily, weekly, monthly)."""
    return {period: caps[period] for period in CapPeriod if period in caps}


def _number(amount: Decimal) -> int | float:
    return int(amount) if amount == amount.to_integral_value() else float(amount)


def _decimal(value: int | float) -> Decimal:
    # repr is the shortest text reading back as the same float (0.1, not 0.1000000000000000055);
    # adding 0 turns -0.0 into 0.
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value)) + 0


def require_console_access(caller: Caller) -> None:
    """Reading the settings needs `org:admin` or the `org:console:access` permission (403)."""
    if not caller.has_permission(CONSOLE_ACCESS):
        raise Forbidden(CONSOLE_ACCESS_REQUIRED)


def unknown_default_agent(agent_id: int) -> Invalid:
    """The breach of a `defaultAgentId` that names no agent of the organization (which the use
    case, not the document, can tell)."""
    return Invalid(
        BAD_REQUEST,
        [
            field_error(
                f"{FIELD}.defaultAgentId", f"{agent_id} is not an agent of this organization"
            )
        ],
    )


def parse_settings(value: object) -> OrgSettings:
    """The settings a decoded JSON value states, or `Invalid("Bad Request")` with a `details`
    entry per breach (whether the default agent exists is the use case's to say)."""
    breaches = _Breaches()
    if not isinstance(value, dict):
        breaches.add(FIELD, "required" if value is None else "expected an object")
        raise breaches.error()
    for key in value:
        if key not in KEYS:
            breaches.add(f"{FIELD}.{_key_text(key)}", "not a setting")
    service_agent = value.get("serviceAgent", False)
    if not isinstance(service_agent, bool):
        breaches.add(f"{FIELD}.serviceAgent", "expected true or false")
    agent = _id(value.get("defaultAgentId"))
    if value.get("defaultAgentId") is not None and agent is None:
        breaches.add(
            f"{FIELD}.defaultAgentId",
            _not_an_id(value.get("defaultAgentId"), "expected null or a positive integer id"),
        )
    settings = OrgSettings(
        service_agent=service_agent is True,
        default_agent_id=agent,
        spend_caps=_caps(value.get("spendCaps", {}), breaches),
        sidebar_pinned_app_ids=_pinned(value.get("sidebarPinnedAppIds", []), breaches),
        sidebar_links=_links(value.get("sidebarLinks", []), breaches),
        custom_html=_modal(value.get("feedbackModal", {}), breaches),
    )
    if breaches:
        raise breaches.error()
    return settings


class _Breaches:
    def __init__(self) -> None:
        self.details: list[dict[str, object]] = []

    def __bool__(self) -> bool:
        return bool(self.details)

    def add(self, path: str, message: str) -> None:
        if len(self.details) < MAX_DETAILS:
            self.details.append(field_error(path, message))

    def check(self, rule: Callable[[str, str], str], value: str, path: str) -> str:
        """`rule(value, path)` (a `domain.text` check), its breach recorded instead of raised."""
        try:
            return rule(value, path)
        except Invalid as error:
            for detail in error.details:
                self.add(path, str(detail.get("message", error.message)))
            return value

    def error(self) -> Invalid:
        return Invalid(BAD_REQUEST, self.details)


def _key_text(key: str) -> str:
    return key[:64] if is_storable(key) else repr(key[:64])


def _id(value: object) -> int | None:
    """`value` as a positive 64-bit integer id, or None: a JSON integer only (`3.0` and `"3"`
    are refused, as in every body)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_BIGINT:
        return value
    return None


def _not_an_id(value: object, otherwise: str) -> str:
    """Why `value` is no id: an id written otherwise than as a JSON integer is told so."""
    return NOT_A_JSON_INTEGER if written_otherwise(value) else otherwise


def _caps(value: object, breaches: _Breaches) -> dict[CapPeriod, Decimal]:
    path = f"{FIELD}.spendCaps"
    if not isinstance(value, dict):
        breaches.add(path, "expected an object with daily, weekly or monthly")
        return {}
    caps: dict[CapPeriod, Decimal] = {}
    periods = {period.value: period for period in CapPeriod}
    for key, amount in value.items():
        if key not in periods:
            breaches.add(f"{path}.{_key_text(key)}", "not a cap period: daily, weekly or monthly")
        elif isinstance(amount, bool) or not isinstance(amount, int | float):
            breaches.add(f"{path}.{key}", "expected a number of US dollars")
        elif not 0 <= amount <= MAX_CAP:  # NaN and infinities fail this too
            breaches.add(f"{path}.{key}", f"expected a number from 0 to {MAX_CAP}")
        else:
            caps[periods[key]] = _decimal(amount)
    return sorted_caps(caps)


def _pinned(value: object, breaches: _Breaches) -> tuple[int, ...]:
    path = f"{FIELD}.sidebarPinnedAppIds"
    if not isinstance(value, list):
        breaches.add(path, "expected a list of app ids")
        return ()
    if len(value) > MAX_PINNED_APPS:
        breaches.add(path, f"at most {MAX_PINNED_APPS} app ids")
        return ()
    ids: list[int] = []
    for index, item in enumerate(value):
        app = _id(item)
        if app is None:
            breaches.add(f"{path}[{index}]", _not_an_id(item, "expected a positive integer id"))
        elif app in ids:
            breaches.add(f"{path}[{index}]", f"{app} is pinned twice")
        else:
            ids.append(app)
    return tuple(ids)


def _links(value: object, breaches: _Breaches) -> tuple[SidebarLink, ...]:
    path = f"{FIELD}.sidebarLinks"
    if not isinstance(value, list):
        breaches.add(path, "expected a list of links")
        return ()
    if len(value) > MAX_SIDEBAR_LINKS:
        breaches.add(path, f"at most {MAX_SIDEBAR_LINKS} links")
        return ()
    links = [_link(item, f"{path}[{index}]", breaches) for index, item in enumerate(value)]
    return tuple(link for link in links if link is not None)


def _link(value: object, path: str, breaches: _Breaches) -> SidebarLink | None:
    if not isinstance(value, dict):
        breaches.add(path, "expected an object with label, url and icon")
        return None
    before = len(breaches.details)
    for key in value:
        if key not in LINK_KEYS:
            breaches.add(f"{path}.{_key_text(key)}", "not a link field: label, url or icon")
    label = value.get("label")
    if not isinstance(label, str) or not label.strip():
        breaches.add(f"{path}.label", "required: 1 to 60 characters")
    elif len(label) > MAX_LINK_LABEL:
        breaches.add(f"{path}.label", f"at most {MAX_LINK_LABEL} characters")
    else:
        label = breaches.check(check_single_line, label.strip(), f"{path}.label")
    url = value.get("url")
    if not isinstance(url, str):
        breaches.add(f"{path}.url", "required: an absolute http or https URL")
    elif len(url) > MAX_LINK_URL or not LINK_URL.fullmatch(url) or not is_storable(url):
        breaches.add(f"{path}.url", "expected an absolute http or https URL")
    icon = value.get("icon", "")
    if not isinstance(icon, str) or len(icon) > MAX_LINK_ICON:
        breaches.add(f"{path}.icon", f"expected at most {MAX_LINK_ICON} characters")
    elif icon:
        icon = breaches.check(check_single_line, icon.strip(), f"{path}.icon")
    if len(breaches.details) > before or not isinstance(label, str):
        return None
    return SidebarLink(label=label, url=str(url), icon=str(icon))


def _modal(value: object, breaches: _Breaches) -> str:
    path = f"{FIELD}.feedbackModal"
    if not isinstance(value, dict):
        breaches.add(path, "expected an object with customHtml")
        return ""
    for key in value:
        if key not in MODAL_KEYS:
            breaches.add(f"{path}.{_key_text(key)}", "not a feedback modal field: customHtml")
    html = value.get("customHtml", "")
    if not isinstance(html, str):
        breaches.add(f"{path}.customHtml", "expected a string of HTML")
        return ""
    if len(html) > MAX_CUSTOM_HTML:
        breaches.add(f"{path}.customHtml", f"at most {MAX_CUSTOM_HTML} characters")
        return ""
    return breaches.check(check_storable, html, f"{path}.customHtml")


def settings_from_document(document: Mapping[str, Any]) -> OrgSettings:
    """Settings read back from a stored document (written by `OrgSettings.document`)."""
    caps = document.get("spendCaps") or {}
    modal = document.get("feedbackModal") or {}
    return OrgSettings(
        service_agent=bool(document.get("serviceAgent", False)),
        default_agent_id=document.get("defaultAgentId"),
        spend_caps=sorted_caps(
            {
                period: _decimal(caps[period.value])
                for period in CapPeriod
                if isinstance(caps.get(period.value), int | float)
            }
        ),
        sidebar_pinned_app_ids=tuple(document.get("sidebarPinnedAppIds") or ()),
        sidebar_links=tuple(
            SidebarLink(label=link["label"], url=link["url"], icon=link.get("icon", ""))
            for link in document.get("sidebarLinks") or ()
        ),
        custom_html=str(modal.get("customHtml", "")),
    )
