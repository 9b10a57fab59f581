"""Fakes of the organization settings ports: the repository in memory, and a sanitizer that
records what it was given."""

from __future__ import annotations

from typing import TYPE_CHECKING

from domain.org_settings import OrgSettings

if TYPE_CHECKING:
    from application.ports.html_sanitizer import HtmlSanitizer
    from application.ports.org_settings_repository import OrgSettingsRepository
    from application.ports.spend_totals import SpendTotals
    from tests.fakes.basics import Restorable
    from tests.fakes.chat import FakeUsageLedger

SettingsState = dict[str, tuple[OrgSettings, str]]


class FakeOrgSettings:
    """Each organization's settings with who saved them last."""

    def __init__(self) -> None:
        self.saved: SettingsState = {}

    def snapshot(self) -> SettingsState:
        return dict(self.saved)

    def restore(self, saved: SettingsState) -> None:
        self.saved = dict(saved)

    async def get(self, org_id: str) -> OrgSettings | None:
        found = self.saved.get(org_id)
        return found[0] if found else None

    async def replace(
        self, org_id: str, settings: OrgSettings, *, updated_by: str
    ) -> OrgSettings | None:
        before = await self.get(org_id)
        self.saved[org_id] = (settings, updated_by)
        return before


class FakeHtmlSanitizer:
    """Drops `<script>` tags (not their content) and keeps what it was given, so that a test
    sees that and where the use case sanitized."""

    def __init__(self) -> None:
        self.given: list[str] = []

    def sanitize(self, html: str) -> str:
        self.given.append(html)
        return html.replace("<script>", "").replace("</script>", "")


if TYPE_CHECKING:  # mypy checks each fake against the port it stands in for
    _settings: OrgSettingsRepository = FakeOrgSettings()
    _settings_store: Restorable[SettingsState] = FakeOrgSettings()
    _sanitizer: HtmlSanitizer = FakeHtmlSanitizer()
    _totals: SpendTotals = FakeUsageLedger()  # the ledger's fake reads spend too
