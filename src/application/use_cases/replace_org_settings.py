from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from hashlib import sha256
from typing import Any

from application.ports.agent_repository import AgentRepository
from application.ports.audit_log import AuditLog
from application.ports.clock import Clock
from application.ports.html_sanitizer import HtmlSanitizer
from application.ports.org_settings_repository import OrgSettingsRepository
from application.ports.spend_totals import SpendTotals
from application.ports.unit_of_work import UnitOfWork
from application.use_cases.get_org_settings import OrgSettingsView, spend_status
from domain.audit import SETTINGS_SAVED, NewAuditEntry
from domain.identity import Caller
from domain.members import require_admin
from domain.org_settings import OrgSettings, parse_settings, unknown_default_agent


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplaceOrgSettingsCommand:
    caller: Caller
    settings: OrgSettings

    @classmethod
    def parse(cls, *, caller: Caller, settings: object) -> ReplaceOrgSettingsCommand:
        """Who, then what: an admin's request (403 otherwise), the `settings` object as decoded
        from JSON checked whole (`parse_settings`: one 400 "Bad Request" naming every breach)."""
        require_admin(caller)
        return cls(caller=caller, settings=parse_settings(settings))


class ReplaceOrgSettings:
    """Replace the organization's settings whole (agent-platform-api.md §2.3, `PUT /orgSettings`).

    Rules: only admins (403). The object was checked whole by `ReplaceOrgSettingsCommand.parse`
    (see `domain.org_settings`): a key left out takes its default, an unknown key is refused,
    caps are numbers from 0 for daily, weekly and monthly only, pinned app ids are at most 50
    distinct positive integers, links at most 20 with http(s) URLs, and the feedback HTML at
    most 20,000 characters. `defaultAgentId` is null or an agent of the organization: an unknown
    one is a breach of its own (400 "Bad Request" naming it), told once the document has passed.
    Nothing is saved unless all pass. That HTML is stored sanitized, as
    the console will render it. The save and an audit entry (what changed, before and after)
    are written in one transaction. Answers as `GetOrgSettings` does.
    """

    def __init__(
        self,
        settings: OrgSettingsRepository,
        agents: AgentRepository,
        sanitizer: HtmlSanitizer,
        audit: AuditLog,
        totals: SpendTotals,
        clock: Clock,
        uow: UnitOfWork,
    ) -> None:
        self._settings = settings
        self._agents = agents
        self._sanitizer = sanitizer
        self._audit = audit
        self._totals = totals
        self._clock = clock
        self._uow = uow

    async def execute(self, command: ReplaceOrgSettingsCommand) -> OrgSettingsView:
        caller = command.caller
        require_admin(caller)
        settings = command.settings
        agent = settings.default_agent_id
        if agent is not None and await self._agents.get(caller.org_id, agent) is None:
            raise unknown_default_agent(agent)
        settings = dataclasses.replace(
            settings, custom_html=self._sanitizer.sanitize(settings.custom_html)
        )
        before = await self._settings.replace(caller.org_id, settings, updated_by=caller.user_id)
        await self._audit.record(
            NewAuditEntry(
                org_id=caller.org_id,
                actor_user_id=caller.user_id,
                action=SETTINGS_SAVED,
                target_type="organization",
                target_id=caller.org_id,
                details=changes(before or OrgSettings(), settings),
            )
        )
        await self._uow.commit()
        spend = await spend_status(self._totals, self._clock, caller.org_id, settings)
        return OrgSettingsView(settings=settings, spend=spend)


def changes(before: OrgSettings, after: OrgSettings) -> dict[str, Any]:
    """The audit entry's details: the settings that changed, with their values before and
    after; the feedback HTML (up to 20,000 characters) by its length and digest only."""
    old, new = before.document(), after.document()
    changed = [key for key in new if old[key] != new[key]]
    return {
        "changed": changed,
        "before": {key: _summary(key, old[key]) for key in changed},
        "after": {key: _summary(key, new[key]) for key in changed},
    }


def _summary(key: str, value: Any) -> Any:
    if key != "feedbackModal":
        return value
    html = value["customHtml"].encode("utf-8")
    return {"customHtmlLength": len(value["customHtml"]), "sha256": sha256(html).hexdigest()}
