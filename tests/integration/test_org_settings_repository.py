"""`PgOrgSettingsRepository` and `PgSpendTotals` against the real database: whole replacement
in the unit of work, the document the spend reservation reads, and row-level security."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from sqlalchemy import text

from adapters.postgres.database import org_connection
from adapters.postgres.org_settings import PgOrgSettingsRepository, PgSpendTotals
from domain.org_settings import OrgSettings, SidebarLink
from domain.spend import CapPeriod, current_periods

pytestmark = pytest.mark.usefixtures("clean")

SETTINGS = OrgSettings(
    service_agent=True,
    default_agent_id=4,
    spend_caps={CapPeriod.DAILY: Decimal("2.5"), CapPeriod.MONTHLY: Decimal(40)},
    sidebar_pinned_app_ids=(2, 1),
    sidebar_links=(SidebarLink(label="Wiki", url="https://wiki.example.com", icon="book"),),
    custom_html="<p>hi</p>",
)


async def test_settings_are_replaced_whole_and_only_when_committed(app_pool, owner_engine):
    async with org_connection(app_pool, "org_a") as db:
        repository = PgOrgSettingsRepository(db)
        assert await repository.get("org_a") is None
        assert await repository.replace("org_a", SETTINGS, updated_by="user_1") is None
        await db.rollback()
        assert await repository.get("org_a") is None
        await repository.replace("org_a", SETTINGS, updated_by="user_1")
        await db.commit()
    async with org_connection(app_pool, "org_a") as db:
        repository = PgOrgSettingsRepository(db)
        assert await repository.get("org_a") == SETTINGS
        replaced = await repository.replace("org_a", OrgSettings(), updated_by="user_2")
        assert replaced == SETTINGS
        await db.commit()
        assert await repository.get("org_a") == OrgSettings()
    async with owner_engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT updated_by, jsonb_typeof(settings -> 'spendCaps'),"
                    " settings -> 'feedbackModal' ->> 'customHtml' FROM org_settings"
                )
            )
        ).one()
    assert tuple(row) == ("user_2", "object", "")


async def test_caps_are_stored_as_json_numbers_the_reservation_reads(app_pool, owner_engine):
    async with org_connection(app_pool, "org_a") as db:
        await PgOrgSettingsRepository(db).replace("org_a", SETTINGS, updated_by="user_1")
        await db.commit()
    async with owner_engine.connect() as connection:
        caps = (
            await connection.execute(
                text(
                    "SELECT (settings -> 'spendCaps' ->> 'daily')::numeric,"
                    " jsonb_typeof(settings -> 'spendCaps' -> 'monthly') FROM org_settings"
                )
            )
        ).one()
    assert tuple(caps) == (Decimal("2.5"), "number")


async def test_another_organization_sees_nothing_even_without_a_filter(app_pool):
    async with org_connection(app_pool, "org_a") as db:
        await PgOrgSettingsRepository(db).replace("org_a", SETTINGS, updated_by="user_1")
        await db.commit()
    async with org_connection(app_pool, "org_b") as db:
        assert await PgOrgSettingsRepository(db).get("org_a") is None
        assert await db.fetch("SELECT org_id FROM org_settings") == []


async def test_spend_totals_sum_the_roll_up_per_period(app_pool, owner_engine):
    now = datetime(2026, 11, 25, 12, tzinfo=UTC)
    async with owner_engine.begin() as connection:
        for org, at, cost in (
            ("org_a", "2026-11-25T01:00:00+00:00", "1.5"),
            ("org_a", "2026-11-24T01:00:00+00:00", "2"),
            ("org_a", "2026-11-02T01:00:00+00:00", "4"),
            ("org_b", "2026-11-25T01:00:00+00:00", "8"),
        ):
            await connection.execute(
                text(
                    "INSERT INTO usage_events (org_id, purpose, model, input_tokens,"
                    " output_tokens, cost_usd, created_at)"
                    " VALUES (:org, 'chat', 'openai:x', 1, 1, :cost, :at)"
                ),
                {"org": org, "cost": Decimal(cost), "at": datetime.fromisoformat(at)},
            )
    async with org_connection(app_pool, "org_a") as db:
        spent = await PgSpendTotals(db).spent("org_a", current_periods(now))
    assert spent == {
        CapPeriod.DAILY: Decimal("1.5"),
        CapPeriod.WEEKLY: Decimal("3.5"),
        CapPeriod.MONTHLY: Decimal("7.5"),
    }
