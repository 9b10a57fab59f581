"""Organization settings: the repository and the spend totals on the request's connection,
the HTML sanitizer for the app's life, and the use cases."""

from __future__ import annotations

from dishka import Provider, Scope, provide, provide_all

from adapters.html.nh3_sanitizer import Nh3HtmlSanitizer
from adapters.postgres.org_settings import PgOrgSettingsRepository, PgSpendTotals
from application.ports.html_sanitizer import HtmlSanitizer
from application.ports.org_settings_repository import OrgSettingsRepository
from application.ports.spend_totals import SpendTotals
from application.use_cases.get_console_layout import GetConsoleLayout
from application.use_cases.get_org_settings import GetOrgSettings
from application.use_cases.replace_org_settings import ReplaceOrgSettings


class OrgSettingsProvider(Provider):
    """Everything behind `/orgSettings`."""

    scope = Scope.REQUEST

    settings = provide(PgOrgSettingsRepository, provides=OrgSettingsRepository)
    totals = provide(PgSpendTotals, provides=SpendTotals)
    sanitizer = provide(Nh3HtmlSanitizer, provides=HtmlSanitizer, scope=Scope.APP)
    use_cases = provide_all(GetOrgSettings, GetConsoleLayout, ReplaceOrgSettings)
