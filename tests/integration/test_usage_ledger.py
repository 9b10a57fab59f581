"""The usage ledger in Postgres: entries, the daily roll-up its trigger keeps, and reservations
against the spend caps, taken one at a time per organization however many run at once."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from sqlalchemy import text

from adapters.postgres.database import FairGate, create_pool
from adapters.postgres.usage import PgUsageLedger
from domain.spend import CapPeriod, Period, current_periods
from domain.usage import PendingCall, UsageEntry, UsagePurpose

pytestmark = pytest.mark.usefixtures("clean")
TTL = timedelta(minutes=15)


def entry(org: str, cost: str, **overrides: object) -> UsageEntry:
    values: dict[str, object] = {
        "org_id": org,
        "user_id": "user_1",
        "thread_id": str(uuid.uuid4()),
        "purpose": UsagePurpose.CHAT,
        "model": "openai:gpt-4o-mini",
        "input_tokens": 1000,
        "output_tokens": 200,
        "cost_usd": Decimal(cost),
    }
    values.update(overrides)
    return UsageEntry(**values)  # type: ignore[arg-type]


def periods_from(today: datetime) -> dict[CapPeriod, Period]:
    """A day, a 'week' of the last four days and a 'month' of the last eleven."""
    day = today.date()
    resets = today + timedelta(days=1)
    return {
        CapPeriod.DAILY: Period(day, resets),
        CapPeriod.WEEKLY: Period(day - timedelta(days=3), resets),
        CapPeriod.MONTHLY: Period(day - timedelta(days=10), resets),
    }


async def set_caps(owner_engine, org: str, caps: dict[str, object]) -> None:
    async with owner_engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO org_settings (org_id, settings) VALUES (:org, CAST(:s AS jsonb)) "
                "ON CONFLICT (org_id) DO UPDATE SET settings = EXCLUDED.settings"
            ),
            {"org": org, "s": json.dumps({"spendCaps": caps})},
        )


async def reserve(
    ledger: PgUsageLedger,
    org: str,
    amount: Decimal,
    ttl: timedelta = TTL,
    reservation_id: str | None = None,
    call: PendingCall | None = None,
) -> list:
    call = call or PendingCall(
        user_id="user_1", thread_id=None, purpose=UsagePurpose.TITLE, model="openai:m",
        input_tokens=10,
    )  # fmt: skip
    periods = current_periods(datetime.now(UTC))
    return await ledger.reserve(
        org, reservation_id or str(uuid.uuid4()), amount, ttl=ttl, periods=periods, call=call
    )


async def reservations(owner_engine) -> list[tuple[str, Decimal]]:
    async with owner_engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT org_id, amount_usd FROM spend_reservations ORDER BY created_at")
        )
        return [tuple(row) for row in rows]  # type: ignore[misc]


async def test_entries_roll_up_per_utc_day_and_are_summed_per_period(app_pool, owner_engine):
    ledger = PgUsageLedger(app_pool, FairGate(2))
    await ledger.record(entry("org_a", "0.00027"))
    await ledger.record(
        entry("org_a", "0.5", thread_id=None, user_id=None, purpose=UsagePurpose.TITLE,
              estimated=True)
    )  # fmt: skip
    await ledger.record(entry("org_a", "2"))
    await ledger.record(entry("org_a", "3"))
    await ledger.record(entry("org_b", "7.25"))
    async with owner_engine.begin() as connection:
        # The trigger moves a changed row's cost between days, and takes a deleted one away.
        await connection.execute(
            text(
                "UPDATE usage_events SET created_at = now() - interval '2 days' "
                "WHERE org_id = 'org_a' AND cost_usd = 2"
            )
        )
        await connection.execute(
            text(
                "UPDATE usage_events SET created_at = now() - interval '40 days' "
                "WHERE org_id = 'org_a' AND cost_usd = 3"
            )
        )
        await connection.execute(text("DELETE FROM usage_events WHERE org_id = 'org_b'"))
        await connection.execute(text("INSERT INTO usage_events (org_id, purpose, model, "
                                      "input_tokens, output_tokens, cost_usd) "
                                      "VALUES ('org_b', 'chat', 'm', 1, 1, 1.25)"))  # fmt: skip
        rows = (
            await connection.execute(
                text(
                    "SELECT purpose, user_id, thread_id, input_tokens, output_tokens, estimated "
                    "FROM usage_events WHERE org_id = 'org_a' AND cost_usd = 0.5"
                )
            )
        ).all()
        days = (
            await connection.execute(
                text("SELECT count(*) FROM usage_daily WHERE org_id = 'org_a'")
            )
        ).scalar()
    assert [tuple(r) for r in rows] == [("title", None, None, 1000, 200, True)]
    assert days == 3
    periods = periods_from(datetime.now(UTC))
    assert await ledger.spent("org_a", periods) == {
        CapPeriod.DAILY: Decimal("0.50027"),
        CapPeriod.WEEKLY: Decimal("2.50027"),
        CapPeriod.MONTHLY: Decimal("2.50027"),
    }
    assert (await ledger.spent("org_b", periods))[CapPeriod.DAILY] == Decimal("1.25")
    assert (await ledger.spent("org_c", periods))[CapPeriod.MONTHLY] == 0


async def test_an_organization_without_caps_is_never_refused_and_its_calls_still_reserved(
    app_pool, owner_engine
):
    ledger = PgUsageLedger(app_pool, FairGate(2))
    assert await reserve(ledger, "org_a", Decimal(5)) == []
    await set_caps(owner_engine, "org_a", {})
    assert await reserve(ledger, "org_a", Decimal(5)) == []
    # Recorded so that a call whose process dies is still charged (the reaper's job).
    assert await reservations(owner_engine) == [("org_a", Decimal(5))] * 2


async def test_reservations_count_against_every_cap_until_settled_or_released(
    app_pool, owner_engine
):
    ledger = PgUsageLedger(app_pool, FairGate(2))
    periods = current_periods(datetime.now(UTC))
    await set_caps(owner_engine, "org_a", {"daily": 10, "monthly": 12.5})
    await ledger.record(entry("org_a", "4"))
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    assert await reserve(ledger, "org_a", Decimal(3), TTL, first) == []
    assert await reserve(ledger, "org_a", Decimal(3), TTL, second) == []
    refused = await reserve(ledger, "org_a", Decimal(1))
    assert [(b.period, b.cap, b.spent) for b in refused] == [(CapPeriod.DAILY, 10, 10)]
    assert refused[0].resets_at == periods[CapPeriod.DAILY].resets_at
    # Settling records the real cost and drops the reservation in the same statement.
    await ledger.record(entry("org_a", "0.5"), settles=first)
    await ledger.release("org_a", second)
    assert await reservations(owner_engine) == []
    assert await reserve(ledger, "org_a", Decimal(9)) == []
    # 4.5 spent and 9 reserved: both caps are reached now.
    refused = await reserve(ledger, "org_a", Decimal(0))
    assert [b.period for b in refused] == [CapPeriod.DAILY, CapPeriod.MONTHLY]
    # Another organization neither sees nor counts them.
    assert await reserve(ledger, "org_b", Decimal(99)) == []


async def test_a_resized_or_expired_reservation_counts_for_its_new_amount_or_not_at_all(
    app_pool, owner_engine
):
    ledger = PgUsageLedger(app_pool, FairGate(2))
    await set_caps(owner_engine, "org_a", {"weekly": 1})
    big = str(uuid.uuid4())
    assert await reserve(ledger, "org_a", Decimal(50), TTL, big) == []
    assert await reserve(ledger, "org_a", Decimal(0))
    await ledger.resize("org_a", big, Decimal("0.25"))
    short = timedelta(milliseconds=1)
    assert await reserve(ledger, "org_a", Decimal(2), short) == []
    await asyncio.sleep(0.05)
    # The expired one no longer counts (it stays for the reaper), the resized one still does.
    assert await reserve(ledger, "org_a", Decimal(0)) == []
    amounts = sorted(amount for _, amount in await reservations(owner_engine))
    assert amounts == [0, Decimal("0.25"), 2]


async def test_concurrent_reservations_never_admit_past_the_cap(database, owner_engine):
    pool = await create_pool(database.url, app_role="agent_platform_app", size=12)
    try:
        ledger = PgUsageLedger(pool, FairGate(12))
        await set_caps(owner_engine, "org_a", {"daily": 5})
        results = await asyncio.gather(*(reserve(ledger, "org_a", Decimal(1)) for _ in range(30)))
    finally:
        await pool.close()
    # Admitted while committed < 5: exactly five of $1, whatever the interleaving.
    assert sum(1 for breaches in results if not breaches) == 5
    assert len(await reservations(owner_engine)) == 5


async def test_a_call_is_charged_once_whoever_settles_it_first(app_pool, owner_engine):
    ledger = PgUsageLedger(app_pool, FairGate(2))
    reservation = str(uuid.uuid4())
    assert await reserve(ledger, "org_a", Decimal(1), TTL, reservation) == []
    await ledger.record(entry("org_a", "0.25"), settles=reservation)
    await ledger.record(entry("org_a", "0.25"), settles=reservation)
    periods = current_periods(datetime.now(UTC))
    assert (await ledger.spent("org_a", periods))[CapPeriod.DAILY] == Decimal("0.25")


async def insert_answer(
    owner_engine, org: str, status: str, text_parts: list[str], ended: str | None
) -> tuple[str, str]:
    """A conversation whose answer (a chat run and its message) is `status`, its run ended
    `ended` ago (an SQL interval; None: not ended) and last beating then: its thread and run
    ids."""
    thread, message, run = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    parts = json.dumps([{"type": "text", "text": t} for t in text_parts])
    when = f"now() - interval '{ended}'" if ended else "now()"
    finished = when if ended else "NULL"
    async with owner_engine.begin() as connection:
        for statement, values in (
            (
                "INSERT INTO conversations (thread_id, org_id, user_id, title_source) "
                "VALUES (:thread, :org, 'user_1', 'default')",
                {},
            ),
            (
                "INSERT INTO chat_messages (id, org_id, thread_id, role, parts) "
                "VALUES (:message, :org, :thread, 'assistant', CAST(:parts AS jsonb))",
                {"parts": parts},
            ),
            (
                "INSERT INTO chat_runs (id, org_id, thread_id, message_id, status, created_at, "
                f"heartbeat_at, finished_at) VALUES (:run, :org, :thread, :message, :status, "
                f"now() - interval '10 minutes', {when}, {finished})",
                {"status": status},
            ),
        ):
            base = {"thread": thread, "org": org, "message": message, "run": run}
            await connection.execute(text(statement), {**base, **values})
    return str(thread), str(run)


def chat(answer: tuple[str, str], text_offset: int = 0) -> PendingCall:
    return PendingCall(
        user_id="user_1", thread_id=answer[0], purpose=UsagePurpose.CHAT,
        model="openai:gpt-4o-mini", input_tokens=40, run_id=answer[1], text_offset=text_offset,
    )  # fmt: skip


async def test_the_reaper_finds_the_calls_no_process_will_settle(app_pool, owner_engine):
    ledger = PgUsageLedger(app_pool, FairGate(2))
    ended = await insert_answer(owner_engine, "org_a", "failed", ["Hel", "lo"], "5 minutes")
    running = await insert_answer(owner_engine, "org_b", "in_progress", ["Wor"], None)
    just_ended = await insert_answer(owner_engine, "org_b", "completed", ["Done"], "1 second")
    first, second, alive, slow, settling, expired = (str(uuid.uuid4()) for _ in range(6))
    await reserve(ledger, "org_a", Decimal(1), TTL, first, chat(ended))
    await reserve(ledger, "org_a", Decimal(1), TTL, second, chat(ended, text_offset=3))
    await reserve(ledger, "org_b", Decimal(1), TTL, alive, chat(running))
    # Past its expiry, but its answer is still running: the answer settles it, however long.
    await reserve(ledger, "org_b", Decimal(1), timedelta(milliseconds=1), slow, chat(running))
    # Its answer ended a moment ago: its own process is settling it.
    await reserve(ledger, "org_b", Decimal(1), TTL, settling, chat(just_ended))
    await reserve(ledger, "org_b", Decimal(1), timedelta(milliseconds=1), expired)
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("UPDATE spend_reservations SET created_at = now() - interval '6 minutes'")
        )
        await connection.execute(
            text("UPDATE spend_reservations SET created_at = created_at + interval '1 second' "
                 "WHERE id = :id"),
            {"id": uuid.UUID(second)},
        )  # fmt: skip
    await asyncio.sleep(0.01)

    found = {a.reservation_id: a for a in await ledger.abandoned(timedelta(seconds=30), 100)}

    assert set(found) == {first, second, expired}
    # Each call of the ended answer is charged the text it produced: "Hel", then "lo".
    assert (found[first].org_id, found[first].output_chars) == ("org_a", 3)
    assert found[second].output_chars == 2
    assert found[first].call == chat(ended)
    assert found[expired].call is not None
    assert found[expired].call.purpose is UsagePurpose.TITLE
    assert found[expired].output_chars == 0
    # One of them settled by its own process already: the other still gets only its own text.
    await ledger.record(entry("org_a", "0.1"), settles=first)
    again = {a.reservation_id: a for a in await ledger.abandoned(timedelta(seconds=30), 100)}
    assert again[second].output_chars == 2 and first not in again
    # Ended less than `quiet` ago: left to its own process a little longer.
    later = await ledger.abandoned(timedelta(minutes=10), 100)
    assert {a.reservation_id for a in later} == {expired}
