"""`/orgSettings`: the organization's settings and its spend against its caps (agent-platform-api.md
§4.8)."""

from __future__ import annotations

import msgspec
from dishka import FromDishka
from litestar import Controller, get, put
from litestar.params import JSONBody

from application.use_cases.get_console_layout import GetConsoleLayout, GetConsoleLayoutQuery
from application.use_cases.get_org_settings import GetOrgSettings, GetOrgSettingsQuery
from application.use_cases.replace_org_settings import (
    ReplaceOrgSettings,
    ReplaceOrgSettingsCommand,
)
from domain.identity import Caller
from domain.members import require_admin
from domain.org_settings import require_console_access
from entrypoints.http.injection import inject
from entrypoints.http.openapi import body_errors, errors
from entrypoints.http.rules import access
from entrypoints.http.settings_schemas import (
    ConsoleLayoutResponse,
    OrgSettingsBody,
    OrgSettingsResponse,
)

SPEND_CAP_STATUS = (
    "`spendCapStatus` has an entry for each cap set: the cap, what the organization's model "
    "calls cost in the current UTC day, ISO week (from Monday) or UTC month, what remains, "
    "whether the cap is reached and when the period resets; amounts in US dollars."
)


class OrgSettingsController(Controller):
    path = "/orgSettings"
    tags = ["Organization settings"]

    @get(
        responses=errors(403),
        summary="The organization's settings and its spend against its caps",
        description="Needs `org:admin` or the permission `org:console:access`. An "
        "organization that never saved gets the defaults. " + SPEND_CAP_STATUS,
        opt=access(require_console_access),
    )
    @inject
    async def read(
        self, caller: FromDishka[Caller], use_case: FromDishka[GetOrgSettings]
    ) -> OrgSettingsResponse:
        view = await use_case.execute(GetOrgSettingsQuery(caller=caller))
        return OrgSettingsResponse.of(view)

    @get(
        "/console",
        responses=errors(403),
        summary="What of the settings every member's console shows",
        description="Any member: the default agent (null when it was deleted since), the "
        "pinned agents, the sidebar links and the feedback modal's sanitized HTML; not the spend "
        "caps or the service agent, which need administrative console access (`GET "
        "/orgSettings`). An organization that never saved gets the defaults.",
    )
    @inject
    async def console_layout(
        self, caller: FromDishka[Caller], use_case: FromDishka[GetConsoleLayout]
    ) -> ConsoleLayoutResponse:
        layout = await use_case.execute(GetConsoleLayoutQuery(caller=caller))
        return ConsoleLayoutResponse.of(layout)

    @put(
        responses=body_errors(403),
        summary="Replace the organization's settings whole",
        description="Needs `org:admin`. A key left out takes its default; every breach of "
        "the rules is a `details` entry of one 400 `Bad Request`, and nothing is saved. "
        "`defaultAgentId` must be an agent of the organization; `feedbackModal.customHtml` "
        "is stored sanitized. Answers as GET does.",
        opt=access(require_admin),
    )
    @inject
    async def replace(
        self,
        data: JSONBody[OrgSettingsBody],
        caller: FromDishka[Caller],
        use_case: FromDishka[ReplaceOrgSettings],
    ) -> OrgSettingsResponse:
        view = await use_case.execute(
            ReplaceOrgSettingsCommand.parse(
                caller=caller, settings=msgspec.to_builtins(data.settings)
            )
        )
        return OrgSettingsResponse.of(view)
