"""Spend caps in the domain (periods, worst cases, refusals) and the `SpendMeter` that reserves,
settles and releases model calls, on an in-memory ledger."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pytest

from application.metering import MeteredCall, SpendMeter, request_texts
from application.ports.chat_model import ChatRequest, ChatTurn, ToolCall, ToolSpec, Usage
from domain.spend import (
    CapPeriod,
    CapStatus,
    SpendCapReached,
    cap_status,
    current_periods,
    worst_case_input_tokens,
)
from domain.usage import AbandonedCall, ModelPrice, PendingCall, PriceList, UsagePurpose
from tests.fakes.basics import FakeClock
from tests.fakes.chat import FakeUsageLedger
from tests.fakes.embeddings import FakeEmbedderRegistry

PRICES = PriceList({"openai:priced": ModelPrice(Decimal(1_000_000), Decimal(2_000_000))})
CALL = MeteredCall(
    org_id="org_a", user_id="u", thread_id=None, purpose=UsagePurpose.CHAT, model="openai:priced"
)


def meter(ledger: FakeUsageLedger) -> SpendMeter:
    return SpendMeter(ledger, PRICES, FakeClock(datetime(2026, 11, 25, 15, 30, tzinfo=UTC)))


def test_periods_are_the_utc_day_the_iso_week_from_monday_and_the_calendar_month():
    periods = current_periods(datetime(2026, 11, 25, 15, 30, tzinfo=UTC))  # a Wednesday
    assert periods[CapPeriod.DAILY].start == date(2026, 11, 25)
    assert periods[CapPeriod.DAILY].resets_at == datetime(2026, 11, 26, tzinfo=UTC)
    assert periods[CapPeriod.WEEKLY].start == date(2026, 11, 23)
    assert periods[CapPeriod.WEEKLY].resets_at == datetime(2026, 11, 30, tzinfo=UTC)
    assert periods[CapPeriod.MONTHLY].start == date(2026, 11, 1)
    assert periods[CapPeriod.MONTHLY].resets_at == datetime(2026, 12, 1, tzinfo=UTC)


def test_periods_cross_years_and_read_other_zones_in_utc():
    from zoneinfo import ZoneInfo

    # 31 December 23:30 in New York is already 1 January in UTC.
    late = datetime(2026, 12, 31, 23, 30, tzinfo=ZoneInfo("America/New_York"))
    periods = current_periods(late)
    assert periods[CapPeriod.DAILY].start == date(2027, 1, 1)
    assert periods[CapPeriod.MONTHLY].resets_at == datetime(2027, 2, 1, tzinfo=UTC)
    december = current_periods(datetime(2026, 12, 31, 12, tzinfo=UTC))
    assert december[CapPeriod.MONTHLY].resets_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert december[CapPeriod.WEEKLY].start == date(2026, 12, 28)


def test_status_lists_only_the_capped_periods_in_order():
    periods = current_periods(datetime(2026, 11, 25, tzinfo=UTC))
    caps = {CapPeriod.MONTHLY: Decimal(10), CapPeriod.DAILY: Decimal(1)}
    spent = dict.fromkeys(CapPeriod, Decimal("1.5"))
    daily, monthly = cap_status(caps, spent, periods)
    assert (daily.period, daily.exceeded, daily.remaining) == (CapPeriod.DAILY, True, 0)
    assert (monthly.period, monthly.exceeded, monthly.remaining) == (
        CapPeriod.MONTHLY,
        False,
        Decimal("8.5"),
    )


def test_a_zero_cap_is_reached_at_once():
    (status,) = cap_status(
        {CapPeriod.DAILY: Decimal(0)},
        {},
        current_periods(datetime(2026, 11, 25, tzinfo=UTC)),
    )
    assert status.exceeded and status.spent == 0


def test_the_worst_case_bounds_any_byte_level_tokenizer():
    # Each UTF-8 byte is at most one token, plus the framing of each message.
    assert worst_case_input_tokens(["abc", "é"]) == 3 + 2 + 2 * 8
    assert worst_case_input_tokens([]) == 8


def test_retry_after_counts_to_the_latest_reset_among_those_reached():
    now = datetime(2026, 11, 25, 23, 59, 30, tzinfo=UTC)
    periods = current_periods(now)
    refusal = SpendCapReached(
        [
            CapStatus(period=p, cap=Decimal(1), spent=Decimal(2), resets_at=periods[p].resets_at)
            for p in (CapPeriod.DAILY, CapPeriod.WEEKLY)
        ]
    )
    assert refusal.retry_after(now) == 30 + 4 * 86400
    assert "daily cap of $1.00" in refusal.explanation
    assert "weekly cap of $1.00 (resets 2026-11-30 00:00 UTC)" in refusal.explanation


def test_a_request_counts_its_turns_tool_calls_tools_and_schema():
    request = ChatRequest(
        model="m",
        turns=[
            ChatTurn(role="user", content="hello"),
            ChatTurn(
                role="assistant",
                tool_calls=(ToolCall(id="1", name="search", arguments={"q": "x"}),),
            ),
        ],
        tools=[ToolSpec(name="search", description="Find", parameters={"type": "object"})],
        response_schema={"type": "object"},
    )
    texts = request_texts(request)
    assert texts[0] == "hello"
    assert '{"q": "x"}' in texts
    assert any(text.startswith("search Find") for text in texts)
    assert texts[-1] == '{"type": "object"}'


async def test_without_caps_a_call_is_admitted_and_settles_to_its_real_cost():
    ledger = FakeUsageLedger()
    spend = meter(ledger)
    reservation = await spend.reserve(CALL, input_tokens=10, output_tokens=5)
    await spend.finish(reservation, prompt=["hi"], answer="ok", usage=Usage(3, 2))
    (entry,) = ledger.entries
    assert (entry.input_tokens, entry.output_tokens, entry.estimated) == (3, 2, False)
    assert entry.cost_usd == Decimal(3 + 4)
    assert ledger.settled == [reservation.id]


async def test_a_call_is_admitted_while_below_the_cap_and_refused_once_it_is_reached():
    ledger = FakeUsageLedger({CapPeriod.DAILY: Decimal(10)})
    spend = meter(ledger)
    # Worst case 2 in + 1 out = $4 each: the third is admitted at $8 reserved, the fourth not.
    first = await spend.reserve(CALL, input_tokens=2, output_tokens=1)
    await spend.reserve(CALL, input_tokens=2, output_tokens=1)
    await spend.reserve(CALL, input_tokens=2, output_tokens=1)
    with pytest.raises(SpendCapReached) as refused:
        await spend.reserve(CALL, input_tokens=2, output_tokens=1)
    (breach,) = refused.value.breaches
    assert (breach.period, breach.cap, breach.spent) == (
        CapPeriod.DAILY,
        Decimal(10),
        Decimal(12),
    )
    # Settling below the worst case frees room again.
    await spend.finish(first, prompt=["p"], answer="a", usage=Usage(1, 0))
    await spend.reserve(CALL, input_tokens=0, output_tokens=0)


async def test_a_call_that_produced_nothing_is_released_and_one_without_figures_estimated():
    ledger = FakeUsageLedger()
    spend = meter(ledger)
    nothing = await spend.reserve(CALL, input_tokens=1, output_tokens=1)
    await spend.finish(nothing, prompt=["p" * 40], answer="", usage=None)
    assert ledger.entries == [] and ledger.released == [nothing.id]
    partial = await spend.reserve(CALL, input_tokens=1, output_tokens=1)
    await spend.finish(partial, prompt=["p" * 40], answer="a" * 8, usage=None)
    (entry,) = ledger.entries
    assert (entry.input_tokens, entry.output_tokens, entry.estimated) == (11, 3, True)


async def test_a_ledger_failure_is_logged_not_raised(caplog):
    class Broken(FakeUsageLedger):
        async def record(self, entry, *, settles=None):
            raise RuntimeError("database went away")

    spend = meter(Broken())
    reservation = await spend.reserve(CALL, input_tokens=1, output_tokens=1)
    await spend.finish(reservation, prompt=["p"], answer="a", usage=Usage(1, 1))
    assert "could not be recorded" in caplog.text


async def test_resizing_sets_the_reservation_to_the_real_worst_case():
    ledger = FakeUsageLedger({CapPeriod.MONTHLY: Decimal(100)})
    spend = meter(ledger)
    reservation = await spend.reserve(CALL, input_tokens=40, output_tokens=0)
    await spend.resize(reservation, input_tokens=2, output_tokens=1)
    assert ledger.reserved == {reservation.id: Decimal(4)}


async def test_a_scoped_meter_charges_what_the_adapter_recorded():
    ledger = FakeUsageLedger()
    scope = meter(ledger).scope(CALL)
    request = ChatRequest(model="priced", turns=[ChatTurn(role="user", content="x")])
    async with scope.metered(request, context_tokens=100) as record:
        record.text.append("answer")
        record.usage = Usage(7, 1)
    (entry,) = ledger.entries
    assert (entry.input_tokens, entry.output_tokens) == (7, 1)
    assert ledger.reserved == {}


async def test_a_scoped_meter_refuses_before_the_call_at_a_cap():
    ledger = FakeUsageLedger({CapPeriod.WEEKLY: Decimal(0)})
    scope = meter(ledger).scope(CALL)
    request = ChatRequest(model="priced", turns=[ChatTurn(role="user", content="x")])
    with pytest.raises(SpendCapReached):
        async with scope.metered(request, context_tokens=100):
            raise AssertionError("the call must not run")


async def test_embeddings_of_priced_models_are_metered_and_free_ones_left_alone():
    ledger = FakeUsageLedger({CapPeriod.DAILY: Decimal(1000)})
    prices = PriceList({"openai:bge": ModelPrice(Decimal(1_000_000), Decimal(0))})
    spend = SpendMeter(ledger, prices, FakeClock())
    embedders = spend.embedders(FakeEmbedderRegistry(), "org_a")
    await embedders.get("local:all-MiniLM-L6-v2", 384).embed(["free text"])
    assert ledger.entries == []
    await embedders.get("openai:bge", 1024).embed(["abcdefgh", "ijkl"])
    (entry,) = ledger.entries
    assert (entry.purpose, entry.input_tokens, entry.estimated) == (
        UsagePurpose.EMBEDDING,
        3 + 2,
        True,
    )
    assert entry.cost_usd == Decimal(5)
    ledger.caps = {CapPeriod.DAILY: Decimal(5)}
    with pytest.raises(SpendCapReached):
        await embedders.get("openai:bge", 1024).embed(["more"])


def test_a_local_model_costs_nothing_unless_priced():
    assert PriceList().cost("local:smollm2-135m", 1000, 1000) == 0
    priced = PriceList({"local:smollm2-135m": ModelPrice(Decimal(1), Decimal(2))})
    assert priced.cost("local:smollm2-135m", 1_000_000, 1_000_000) == Decimal(3)


async def test_every_call_records_what_the_reaper_needs_to_charge_it():
    ledger = FakeUsageLedger()
    request = ChatRequest(model="priced", turns=[ChatTurn(role="user", content="x" * 40)])
    reservation = await meter(ledger).reserve_request(CALL, request, context_tokens=1000)
    org_id, pending = ledger.calls[reservation.id]
    assert org_id == "org_a"
    assert (pending.purpose, pending.model, pending.user_id) == (CALL.purpose, CALL.model, "u")
    assert pending.input_tokens == 11  # the prompt's estimate, not its worst case


async def test_the_reaper_charges_an_abandoned_call_its_prompt_and_the_text_it_stored():
    ledger = FakeUsageLedger()
    pending = PendingCall(
        user_id="u", thread_id="t-1", purpose=UsagePurpose.CHAT, model="openai:priced",
        input_tokens=100,
    )  # fmt: skip
    ledger.abandon = [
        AbandonedCall(reservation_id="r-1", org_id="org_a", call=pending, output_chars=10),
        AbandonedCall(reservation_id="r-2", org_id="org_a", call=None, output_chars=0),
    ]
    assert await meter(ledger).settle_abandoned(timedelta(seconds=30)) == 1
    (entry,) = ledger.entries
    assert (entry.org_id, entry.thread_id, entry.purpose) == ("org_a", "t-1", UsagePurpose.CHAT)
    assert (entry.input_tokens, entry.output_tokens, entry.estimated) == (100, 3, True)
    assert entry.cost_usd == Decimal(100 + 2 * 3)
    assert ledger.settled == ["r-1"]
    assert ledger.released == ["r-2"]


async def test_a_reservation_cut_short_is_released_not_left_to_be_charged():
    class SlowLedger(FakeUsageLedger):
        async def reserve(self, org_id, reservation_id, amount, **kwargs):
            admitted = await super().reserve(org_id, reservation_id, amount, **kwargs)
            await asyncio.sleep(30)  # committed, and the caller is cut before it hears so
            return admitted

    ledger = SlowLedger()
    task = asyncio.create_task(meter(ledger).reserve(CALL, input_tokens=10, output_tokens=5))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (reserved,) = ledger.calls
    assert ledger.released == [reserved]
