from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.clock import Clock
from application.ports.org_settings_repository import OrgSettingsRepository
from application.ports.spend_totals import SpendTotals
from domain.identity import Caller
from domain.org_settings import OrgSettings, require_console_access
from domain.spend import CapStatus, cap_status, current_periods


@dataclass(frozen=True, slots=True, kw_only=True)
class GetOrgSettingsQuery:
    caller: Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class OrgSettingsView:
    """The settings and where the organization stands against each cap it set."""

    settings: OrgSettings
    spend: list[CapStatus]


async def spend_status(
    totals: SpendTotals, clock: Clock, org_id: str, settings: OrgSettings
) -> list[CapStatus]:
    """Each capped period's cap, what the ledger recorded in it and when it resets, in UTC;
    nothing is read when no cap is set."""
    if not settings.spend_caps:
        return []
    periods = current_periods(clock.now())
    spent = await totals.spent(org_id, periods)
    return cap_status(settings.spend_caps, spent, periods)


class GetOrgSettings:
    """Read the organization's settings (agent-platform-api.md §4.8) and its spend against its caps.

    Rules: the caller needs administrative console access, `org:admin` or the permission
    `org:console:access` (403 otherwise). An organization that never saved gets the defaults
    (no service agent, no default agent, no caps, no pins or links, empty feedback HTML). For
    each cap set, the status gives the cap, what the organization's model calls cost in the
    current UTC day, ISO week (from Monday) or UTC month, what remains (never below zero),
    whether the cap is reached (spent at or above it) and when the period resets. A default
    agent deleted since the settings were saved reads as none, so that the settings read can
    always be saved back.
    """

    def __init__(
        self,
        settings: OrgSettingsRepository,
        agents: AgentRepository,
        totals: SpendTotals,
        clock: Clock,
    ) -> None:
        self._settings = settings
        self._agents = agents
        self._totals = totals
        self._clock = clock

    async def execute(self, query: GetOrgSettingsQuery) -> OrgSettingsView:
        caller = query.caller
        require_console_access(caller)
        settings = await self._settings.get(caller.org_id) or OrgSettings()
        agent = settings.default_agent_id
        if agent is not None and await self._agents.get(caller.org_id, agent) is None:
            settings = dataclasses.replace(settings, default_agent_id=None)
        spend = await spend_status(self._totals, self._clock, caller.org_id, settings)
        return OrgSettingsView(settings=settings, spend=spend)
