from __future__ import annotations

from dataclasses import dataclass

from application.ports.agent_repository import AgentRepository
from application.ports.org_settings_repository import OrgSettingsRepository
from domain.identity import Caller
from domain.org_settings import OrgSettings, SidebarLink


@dataclass(frozen=True, slots=True, kw_only=True)
class GetConsoleLayoutQuery:
    caller: Caller


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsoleLayout:
    """What of the organization's settings shapes every member's console."""

    default_agent_id: int | None
    sidebar_pinned_app_ids: tuple[int, ...]
    sidebar_links: tuple[SidebarLink, ...]
    custom_html: str


class GetConsoleLayout:
    """Read the parts of the organization's settings that every member's console shows: the
    default agent, the pinned agents, the sidebar links and the feedback modal's HTML.

    Rules: any member of the organization may read them (the whole settings, with the spend
    caps and what was spent, need administrative console access: `GetOrgSettings`). An
    organization that never saved gets the defaults. A default agent deleted since the
    settings were saved reads as none, as in `GetOrgSettings`; pinned ids are passed on as
    saved (the console shows the agents it finds).
    """

    def __init__(self, settings: OrgSettingsRepository, agents: AgentRepository) -> None:
        self._settings = settings
        self._agents = agents

    async def execute(self, query: GetConsoleLayoutQuery) -> ConsoleLayout:
        caller = query.caller
        settings = await self._settings.get(caller.org_id) or OrgSettings()
        agent = settings.default_agent_id
        if agent is not None and await self._agents.get(caller.org_id, agent) is None:
            agent = None
        return ConsoleLayout(
            default_agent_id=agent,
            sidebar_pinned_app_ids=settings.sidebar_pinned_app_ids,
            sidebar_links=settings.sidebar_links,
            custom_html=settings.custom_html,
        )
