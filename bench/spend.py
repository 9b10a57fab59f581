"""Spend caps: `GET /orgSettings` with 1,000,000 usage events in the ledger, and what the cap
check adds to a chat's time to first byte.

    .venv/bin/python bench/spend.py [--events 1000000] [--rounds 3] [--requests 200]

The two organizations, the phases, the targets and options: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from importlib.metadata import version
from pathlib import Path
from typing import Any

import asyncpg
import harness
import httpx
from harness import BenchError, PairedChat, Rounds, expect, fmt
from harness import median as med
from scripted_provider import content_text

SECTION_TITLE = "Spend caps: GET /orgSettings over 1,000,000 usage events, the cap check in chat"
CAPPED_ORG = "org_bench"
UNCAPPED_ORG = "org_bench_nocaps"
MODEL = "scripted"
PRICES = {f"openai:{MODEL}": {"input": 1, "output": 2}}
CAP = 1_000_000
SETTINGS_TARGET_MS = 10.0
ADDED_TARGET_MS = 2.0
PROMPT = "Tell me about streaming."
AGENT_ROLE = "You are a helpful assistant of the operations team."
EXTRA_AGENTS = 4
APP_ROLE = os.environ.get("AP_DATABASE_APP_ROLE", "agent_platform_app")

# Random tokens, priced like a hosted model ($2.50 / $10 per million): about $0.0055 a call.
SEED_EVENTS = """
    INSERT INTO usage_events (org_id, user_id, thread_id, purpose, model, input_tokens,
        output_tokens, cost_usd, estimated, created_at)
    SELECT $1, 'user_' || (g % 40), NULL, 'chat', 'openai:gpt-4o', i, o,
           round((i * 2.5 + o * 10) / 1e6, 8), false, t
    FROM (
        SELECT g, 100 + (random() * 3000)::int AS i, 10 + (random() * 600)::int AS o,
               now() - random() * ($3::float8 * interval '1 day') AS t
        FROM generate_series(1, $2) AS g
    ) AS r
    ORDER BY t"""
# The migration's backfill, for one organization.
BACKFILL = """
    INSERT INTO usage_daily (org_id, day, cost_usd)
    SELECT org_id, (created_at AT TIME ZONE 'UTC')::date, sum(cost_usd)
    FROM usage_events WHERE org_id = $1 GROUP BY 1, 2
    ON CONFLICT (org_id, day) DO UPDATE SET cost_usd = excluded.cost_usd"""
# Rows of the roll-up that differ from the ledger they sum.
ROLL_UP_MISMATCHES = """
    SELECT count(*) FROM (
        SELECT (created_at AT TIME ZONE 'UTC')::date AS day, sum(cost_usd) AS cost
        FROM usage_events WHERE org_id = $1 GROUP BY 1
    ) AS e FULL JOIN (SELECT day, cost_usd AS cost FROM usage_daily WHERE org_id = $1) AS d
    USING (day) WHERE e.cost IS DISTINCT FROM d.cost"""
LEDGER_SPENT = """
    SELECT coalesce(sum(cost_usd) FILTER (WHERE created_at >= $2), 0),
           coalesce(sum(cost_usd) FILTER (WHERE created_at >= $3), 0),
           coalesce(sum(cost_usd) FILTER (WHERE created_at >= $4), 0)
    FROM usage_events WHERE org_id = $1 AND created_at >= least($3, $4)"""


# data -----------------------------------------------------------------------------------
@dataclass
class Seeded:
    mode: str
    events: int
    seconds: float
    analyze_seconds: float
    daily_rows: int
    ledger_bytes: int
    total_usd: float
    spent: dict[str, float]  # from usage_events directly, per period
    agents: dict[str, int] = field(default_factory=dict)
    bodies: dict[str, int] = field(default_factory=dict)


def periods(today: date | None = None) -> dict[str, date]:
    """The starts of the UTC day, ISO week and UTC month (as `domain.spend.current_periods`)."""
    today = today or datetime.now(UTC).date()
    return {
        "daily": today,
        "weekly": today - timedelta(days=today.weekday()),
        "monthly": today.replace(day=1),
    }


def midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def require(condition: bool, message: str) -> None:
    if not condition:
        raise BenchError(message)


async def seed_ledger(pgdata: Path, args: argparse.Namespace) -> Seeded:
    async with harness.owner(pgdata) as conn:
        await conn.execute("SELECT setseed($1)", args.seed / 1000)
        t0 = time.perf_counter()
        async with conn.transaction():
            if args.seed_mode == "bulk":
                # Triggers off (the roll-up too) for the insert; then the migration's GROUP BY.
                await conn.execute("SET LOCAL session_replication_role = replica")
            await conn.execute(SEED_EVENTS, CAPPED_ORG, args.events, float(args.days))
            if args.seed_mode == "bulk":
                await conn.execute("SET LOCAL session_replication_role = origin")
                await conn.execute(BACKFILL, CAPPED_ORG)
        seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        await conn.execute("VACUUM ANALYZE usage_events, usage_daily")
        analyze_seconds = time.perf_counter() - t0
        mismatches = await conn.fetchval(ROLL_UP_MISMATCHES, CAPPED_ORG)
        require(mismatches == 0, f"usage_daily differs from usage_events on {mismatches} days")
        count = await conn.fetchval(
            "SELECT count(*) FROM usage_events WHERE org_id = $1", CAPPED_ORG
        )
        require(count == args.events, f"{count} usage events seeded, not {args.events}")
        starts = periods()
        row = await conn.fetchrow(LEDGER_SPENT, CAPPED_ORG, *(midnight(starts[p]) for p in starts))
        return Seeded(
            mode=args.seed_mode,
            events=count,
            seconds=seconds,
            analyze_seconds=analyze_seconds,
            daily_rows=await conn.fetchval(
                "SELECT count(*) FROM usage_daily WHERE org_id = $1", CAPPED_ORG
            ),
            ledger_bytes=await conn.fetchval("SELECT pg_total_relation_size('usage_events')"),
            total_usd=float(
                await conn.fetchval(
                    "SELECT sum(cost_usd) FROM usage_events WHERE org_id = $1", CAPPED_ORG
                )
            ),
            spent={p: float(row[i]) for i, p in enumerate(starts)},
        )


def save_settings(url: str, admin: str, settings: dict[str, Any]) -> None:
    """`PUT /orgSettings` as the organization's admin."""
    body, headers = {"settings": settings}, harness.bearer(admin)
    expect(httpx.put(f"{url}/orgSettings", json=body, headers=headers, timeout=30.0), 200)


# listings -------------------------------------------------------------------------------
TARGETS = {
    "capped": "`GET /orgSettings`, capped organization (its usage events, 3 caps)",
    "uncapped": "`GET /orgSettings`, organization without caps or events",
    "agents": f"`GET /agents` ({EXTRA_AGENTS + 1} agents), capped organization",
}
LOADS = {"unloaded": (1, 1), "loaded": (2, 32)}


# chat -----------------------------------------------------------------------------------
CONFIGS = ("capped", "uncapped")


# SQL ------------------------------------------------------------------------------------
@dataclass
class SqlResults:
    rows: dict[str, list[float]] = field(default_factory=dict)  # per round p50 (ms)
    plans: dict[str, str] = field(default_factory=dict)
    settings: dict[str, str] = field(default_factory=dict)
    refused: int = 0


SQL_ROWS = {
    "select1": "`SELECT 1` (a round trip)",
    "reserve_capped": "`ap_reserve_spend` (`RESERVE`), capped organization: lock, expiry "
    "DELETE, sums, INSERT, commit",
    "resize_capped": "`RESIZE` of that reservation (UPDATE by id, commit)",
    "release_capped": "`RELEASE` of it (DELETE by id, commit)",
    "reserve_uncapped": "`RESERVE`, organization without caps (settings read, return)",
    "resize_uncapped": "`RESIZE`, organization without caps (updates no row)",
    "spent_capped": "`SPENT`, the spend read of `GET /orgSettings` (`usage_daily`), capped",
    "reserve_async": "`RESERVE`, capped, `synchronous_commit = off` (not what the service runs)",
    "resize_async": "`RESIZE`, capped, `synchronous_commit = off`",
    "release_async": "`RELEASE`, capped, `synchronous_commit = off`",
}
# Each reservation is resized and released in order; the groups swap order every iteration.
SQL_GROUPS = (
    ("select1",),
    ("reserve_capped", "resize_capped", "release_capped"),
    ("reserve_uncapped", "resize_uncapped"),
    ("spent_capped",),
    ("reserve_async", "resize_async", "release_async"),
)
SERVER_SETTINGS = ("synchronous_commit", "fsync", "wal_sync_method", "commit_delay", "wal_level")


async def app_connection(pgdata: Path, org: str) -> asyncpg.Connection:
    """As the service's connections run: the app role (row-level security), `app.org_id` set."""
    conn = await harness.owner_connection(pgdata)
    await conn.execute(f'SET ROLE "{APP_ROLE}"')
    await conn.execute("SELECT set_config('app.org_id', $1, false)", org)
    return conn


async def measure_sql(pgdata: Path, args: argparse.Namespace) -> SqlResults:
    from adapters.postgres.usage import RELEASE, RESERVE, RESIZE, SPENT

    out = SqlResults()
    capped = await app_connection(pgdata, CAPPED_ORG)
    uncapped = await app_connection(pgdata, UNCAPPED_ORG)
    relaxed = await app_connection(pgdata, CAPPED_ORG)
    await relaxed.execute("SET synchronous_commit = off")
    starts = periods()
    dates = [starts[p] for p in ("daily", "weekly", "monthly")]
    ttl = timedelta(minutes=15)
    pending: dict[str, uuid.UUID] = {}
    try:
        for name in SERVER_SETTINGS:
            out.settings[name] = await capped.fetchval(f"SHOW {name}")

        def reserve(conn: asyncpg.Connection, org: str, key: str) -> Callable[[], Awaitable[None]]:
            async def step() -> None:
                rid = uuid.uuid4()
                rows = await conn.fetch(RESERVE, org, rid, Decimal("0.1310"), ttl, *dates)
                if rows:
                    out.refused += 1
                pending[key] = rid

            return step

        def resize(conn: asyncpg.Connection, key: str) -> Callable[[], Awaitable[None]]:
            async def step() -> None:
                await conn.execute(RESIZE, pending[key], Decimal("0.0021"))

            return step

        def release(conn: asyncpg.Connection, key: str) -> Callable[[], Awaitable[None]]:
            async def step() -> None:
                await conn.execute(RELEASE, pending.pop(key))

            return step

        async def spent_capped() -> None:
            await capped.fetch(SPENT, CAPPED_ORG, *dates)

        async def select1() -> None:
            await capped.fetchval("SELECT 1")

        steps: dict[str, Callable[[], Awaitable[None]]] = {
            "select1": select1,
            "reserve_capped": reserve(capped, CAPPED_ORG, "capped"),
            "resize_capped": resize(capped, "capped"),
            "release_capped": release(capped, "capped"),
            "reserve_uncapped": reserve(uncapped, UNCAPPED_ORG, "uncapped"),
            "resize_uncapped": resize(uncapped, "uncapped"),
            "spent_capped": spent_capped,
            "reserve_async": reserve(relaxed, CAPPED_ORG, "async"),
            "resize_async": resize(relaxed, "async"),
            "release_async": release(relaxed, "async"),
        }

        def order(r: int, i: int) -> list[str]:  # the groups' order alternates
            return [n for g in harness.alternate(SQL_GROUPS, i + r) for n in g]

        out.rows = await harness.time_steps(
            steps, args.rounds, args.sql_iterations, args.sql_warmup, "SQL", order
        )
        left = await capped.fetchval("SELECT count(*) FROM spend_reservations")
        require(left == 0, f"{left} reservations left after the SQL steps")
        explain = "EXPLAIN (ANALYZE, BUFFERS, SUMMARY) "
        out.plans["spent"] = "\n".join(
            r[0] for r in await capped.fetch(explain + SPENT, CAPPED_ORG, *dates)
        )
        ledger = await capped.fetch(
            explain + LEDGER_SPENT, CAPPED_ORG, *(midnight(d) for d in dates)
        )
        out.plans["ledger"] = "\n".join(r[0] for r in ledger)
    finally:
        await capped.close()
        await uncapped.close()
        await relaxed.close()
    return out


async def synchronous_commit(pgdata: Path, on: bool) -> None:
    """The server's default for every session (the pool's too, at their next statement)."""
    async with harness.owner(pgdata) as conn:
        if on:
            await conn.execute("ALTER SYSTEM RESET synchronous_commit")
        else:
            await conn.execute("ALTER SYSTEM SET synchronous_commit = off")
        await conn.execute("SELECT pg_reload_conf()")
        await asyncio.sleep(0.5)
        got = await conn.fetchval("SHOW synchronous_commit")
        require(got == ("on" if on else "off"), f"synchronous_commit is {got}")


async def leftovers(pgdata: Path) -> dict[str, Any]:
    async with harness.owner(pgdata) as conn:
        return {
            "reservations": await conn.fetchval("SELECT count(*) FROM spend_reservations"),
            "events": dict(
                await conn.fetch(
                    "SELECT org_id, count(*) FROM usage_events GROUP BY org_id ORDER BY org_id"
                )
            ),
        }


# report -----------------------------------------------------------------------------------
def plan_lines(plan: str) -> list[str]:
    return ["```", *plan.splitlines(), "```"]


def section(
    args: argparse.Namespace,
    info: dict[str, str],
    seeded: Seeded,
    lists: Rounds,
    chat: PairedChat,
    relaxed: PairedChat | None,
    sql: SqlResults | None,
    end: dict[str, Any],
) -> tuple[str, bool]:
    verdict = harness.verdict
    settings_p50 = lists.median(("capped", "unloaded"), "p50_ms")
    added = chat.added("first_p50")
    errors = sum(chat.errors.values())
    ok = settings_p50 < SETTINGS_TARGET_MS and added < ADDED_TARGET_MS and errors == 0
    starts = periods()
    rows = {"uncapped": "no caps, no events", "capped": f"3 caps, {seeded.events:,} events"}
    seed_how = (
        "through the `usage_events_roll_up` row trigger (one upsert of `usage_daily` per row)"
        if seeded.mode == "trigger"
        else "with triggers off (`SET LOCAL session_replication_role = replica`), then "
        "`usage_daily` filled with the migration's backfill GROUP BY for the organization, in "
        "the same transaction (through the trigger, one statement of 1,000,000 rows took 340 s "
        "in an earlier run: within one transaction each upsert of a day's `usage_daily` row "
        "walks the versions left by the ones before, ~11,000 a day; the service inserts one "
        "event per transaction)"
    )
    lines = [
        *harness.heading(SECTION_TITLE, "spend.py"),
        f"- Machine: {harness.machine_line(info)}; at the end load average {end['load']}. The "
        "platform, its PostgreSQL, the scripted provider, wrk and the client share these CPUs, "
        "and other sessions' jobs were running on the machine.",
        f"- Code measured: {args.code_note or harness.code_state()}.",
        f"- Platform: `agent-platform serve` (one uvicorn worker on uvloop, litestar "
        f"{version('litestar')}, dishka {version('dishka')}, asyncpg {version('asyncpg')}) on a "
        "temporary data dir (embedded PostgreSQL), `AP_WORKER_IN_PROCESS=false`, "
        f"`AP_LOG_LEVEL={args.log_level}`, `AP_MODEL_PRICES='{json.dumps(PRICES)}'`, "
        "`AP_OPENAI_BASE_URL` at `bench/scripted_provider.py` "
        f"({args.tokens} content deltas written at once, usage reported).",
        f"- Data: organization `{CAPPED_ORG}` with {seeded.events:,} rows in `usage_events` "
        f"(created over the last {args.days} days, inserted in time order, 100-3100 input and "
        f"10-610 output tokens, cost at $2.50/$10 per million: ${seeded.total_usd:,.2f} in all; "
        f"`setseed({args.seed / 1000:g})`), inserted in one SQL statement as the database owner "
        f"{seed_how}, in {seeded.seconds:.1f} s (`VACUUM ANALYZE` {seeded.analyze_seconds:.1f} s "
        "more); checked: `usage_daily` equals the ledger's GROUP BY on every day "
        f"({seeded.daily_rows} rows). The table with its indexes: "
        f"{seeded.ledger_bytes / 1024**2:.0f} MiB. Its settings `spendCaps` daily, weekly and "
        f"monthly at {CAP:,} (saved with `PUT /orgSettings` as `org:admin`); in the ledger the day "
        f"(from {starts['daily']}) holds ${seeded.spent['daily']:,.2f}, the ISO week (from "
        f"{starts['weekly']}) ${seeded.spent['weekly']:,.2f}, the month (from {starts['monthly']}) "
        f"${seeded.spent['monthly']:,.2f}; `GET /orgSettings` answered these sums (checked before "
        f"the measurements). {EXTRA_AGENTS + 1} agents. Organization `{UNCAPPED_ORG}`: settings "
        "saved without caps, no usage events, one agent.",
        f"- `GET /orgSettings`: wrk, `-t1 -c1` (unloaded: one request at a time, the latency "
        f"without queueing; the target's figure) and `-t2 -c32` (loaded), {args.duration:g} s "
        f"each, one target at a time; a {args.warmup:g} s warm-up per target, then "
        f"{args.rounds} rounds rotating the order; figures are medians over the rounds. "
        "Baselines in the same run: the same endpoint for the organization without caps "
        "(the same settings read, no spend read) and `GET /agents` of the capped organization "
        f"({EXTRA_AGENTS + 1} agents). Bodies: {seeded.bodies.get('capped', 0)} bytes "
        f"(capped), {seeded.bodies.get('uncapped', 0)} (uncapped), "
        f"{seeded.bodies.get('agents', 0)} (agents).",
        "",
        "| Request | load | req/s | p50 (ms) | p99 (ms) | p50 per round (ms) |",
        "|---|---|---:|---:|---:|---|",
        *harness.wrk_table(lists, TARGETS, LOADS, per_round=True),
    ]
    c_un, u_un = settings_p50, lists.median(("uncapped", "unloaded"), "p50_ms")
    a_un = lists.median(("agents", "unloaded"), "p50_ms")
    rps = lists.median(("capped", "loaded"), "rps") / lists.median(("uncapped", "loaded"), "rps")
    lines += [
        "",
        f"Unloaded p50: capped {c_un:.2f} ms = without caps {u_un:.2f} ms "
        f"{c_un - u_un:+.2f} ms (the spend read and three cap statuses); `GET /agents` "
        f"{a_un:.2f} ms. Loaded throughput: capped {rps:.0%} of uncapped.",
        "",
        f"Chat: one agent per organization on `openai:{MODEL}`, the same name, role and model; one "
        "httpx client (keep-alive), every chat a new conversation with a supplied title (no title "
        f"job); {args.chat_warmup} warm-up chats per organization, then {args.chat_rounds} rounds "
        f"of {args.requests} chats per organization, alternating one by one (the first of each "
        "pair alternating too). Both organizations' chats are metered alike (`SendChatMessage` "
        "admits every chat with `ap_reserve_spend` before storing anything, the answer resizes the "
        "reservation once its prompt is built and settles it with the provider's usage after the "
        "stream): for the organization without caps the function reads the settings and returns "
        "(no lock, no reservation row), for the capped one it takes the per-organization advisory "
        "lock, deletes expired reservations, sums what is reserved and the roll-up's days of the "
        "week and month, checks the three caps and inserts the reservation. *first* = the first "
        "`text-delta` parsed, from just before the request is sent; *provider read* = when the "
        "provider had read the platform's request (its wall clock, same machine); *headers* = the "
        "response's headers (sent once the message is stored, after the admission). Added = p50 "
        "capped - p50 uncapped, per round, median over rounds; the paired figure is the median of "
        "the per-pair differences.",
        "",
        *chat.table("Chat, organization", rows, "added by the cap check"),
        "",
        f"Per round (ms): {chat.per_round('capped', 'uncapped')} After the run: "
        f"{end['reservations']} reservations left (every one settled), ledger rows added by the "
        f"chats: {end['events'].get(CAPPED_ORG, 0) - seeded.events} capped ({chat.chats['capped']} "
        f"chats{', the phase below included' if relaxed else ''}), "
        f"{end['events'].get(UNCAPPED_ORG, 0)} uncapped ({chat.chats['uncapped']}).",
        "",
    ]
    if relaxed is not None:
        lines += [
            "The same chats again (diagnostic, not how the service runs) with `synchronous_commit "
            "= off` for the whole server (`ALTER SYSTEM`, reloaded, reset afterwards), so that no "
            "commit waits for its WAL to reach the disk, the two organizations' alike:",
            "",
            *relaxed.table("Chat, `synchronous_commit = off`", rows, "added by the cap check"),
            "",
            f"Per round (ms): {relaxed.per_round('capped', 'uncapped')}",
            "",
        ]
    if sql is not None:
        r = {k: med(v) for k, v in sql.rows.items()}
        pair_capped = r["reserve_capped"] + r["resize_capped"]
        pair_uncapped = r["reserve_uncapped"] + r["resize_uncapped"]
        pair_async = r["reserve_async"] + r["resize_async"]
        lines += [
            "SQL (diagnostic): the ledger's statements from `adapters/postgres/usage.py` sent "
            "from the benchmark's process over the Unix socket, on connections set up as the "
            f"service's (`SET ROLE {APP_ROLE}`: row-level security; `app.org_id` set), one "
            f"statement at a time, interleaved, {args.sql_iterations} iterations per round, "
            "p50 per round, median over rounds. Each reservation is released by the next "
            f"step, so none accumulate (refused: {sql.refused}).",
            "",
            "| Statement | p50 (ms) | per round |",
            "|---|---:|---|",
        ]
        for name, label in SQL_ROWS.items():
            lines.append(f"| {label} | {r[name]:.3f} | {fmt(sql.rows[name], 3)} |")
        lines += [
            "",
            "What a capped chat sends before the model call that an uncapped one does cheaper: the "
            f"admission `RESERVE` ({r['reserve_capped']:.3f} against {r['reserve_uncapped']:.3f} "
            f"ms: {r['reserve_capped'] - r['reserve_uncapped']:+.3f} ms) and the `RESIZE` once the "
            f"prompt is built ({r['resize_capped']:.3f} against {r['resize_uncapped']:.3f} ms: "
            f"{r['resize_capped'] - r['resize_uncapped']:+.3f} ms), together "
            f"{pair_capped - pair_uncapped:.3f} ms at the database; the settlement comes after the "
            "stream. Both capped statements write, so each commit waits for its WAL to reach the "
            "disk (server settings: "
            + ", ".join(f"`{k}={v}`" for k, v in sql.settings.items())
            + "); the uncapped ones write nothing. With `synchronous_commit = off` on the "
            "connection (as `chat_runs.py` does for the answer's log) the capped pair takes "
            f"{pair_async:.3f} ms ({pair_async - pair_uncapped:+.3f} ms over the uncapped pair); a "
            "commit's flush alone, the release's DELETE by id less the asynchronous one: "
            f"{r['release_capped'] - r['release_async']:.3f} ms.",
            "",
            "The spend read (`SPENT`, capped organization), EXPLAIN ANALYZE as the app role:",
            "",
            *plan_lines(sql.plans["spent"]),
            "",
            "The same three sums taken from `usage_events` directly (what the roll-up saves; "
            "not run by the service):",
            "",
            *plan_lines(sql.plans["ledger"]),
            "",
        ]
    if sql is not None and relaxed is not None:
        r = {k: med(v) for k, v in sql.rows.items()}
        flush = r["release_capped"] - r["release_async"]
        work = r["reserve_async"] - r["reserve_uncapped"]
        lines += [
            "Where the chat's added time goes: before the model call, a capped chat's admission "
            "(`RESERVE`, the reservation's INSERT) and its resize (`RESIZE`, an UPDATE) each "
            "commit a write and wait for the WAL flush; the uncapped chat sends the same two "
            f"statements and writes nothing. A flush measured {flush:.2f} ms here (the release "
            "less its asynchronous twin; it varies with the disk's other work); the cap check's "
            "own work (lock, expiry DELETE, the reserved sum, the roll-up's days of the week and "
            f"month, the INSERT) is {work:.2f} ms (asynchronous `RESERVE` less the uncapped one). "
            f"Without the flushes the chat's added time is {relaxed.added('first_p50'):.2f} ms "
            f"against {chat.added('first_p50'):.2f} ms with them. The {seeded.events:,} events do "
            "not enter into it: the check reads `usage_daily`, one row per day of the month (and "
            f"of the week, when it began in the month before) ({r['spent_capped']:.2f} ms for the "
            f"same sums as `GET /orgSettings`, a round trip being {r['select1']:.2f} ms).",
            "",
        ]
    lines += [
        "| Target | Measured | Result |",
        "|---|---:|---|",
        f"| `GET /orgSettings` with {seeded.events:,} usage events: p50 < {SETTINGS_TARGET_MS:g} "
        f"ms (unloaded) | {settings_p50:.2f} ms | {verdict(settings_p50 < SETTINGS_TARGET_MS)} |",
        f"| the cap check's added time to a chat's first byte at p50 < {ADDED_TARGET_MS:g} ms | "
        f"{added:.2f} ms | {verdict(added < ADDED_TARGET_MS and errors == 0)} |",
        *(
            [
                f"| the same with `synchronous_commit = off` server-wide (diagnostic) | "
                f"{relaxed.added('first_p50'):.2f} ms | reported |"
            ]
            if relaxed is not None
            else []
        ),
        f"| `GET /orgSettings`, loaded (`-t2 -c32`) p50 / req/s | "
        f"{lists.median(('capped', 'loaded'), 'p50_ms'):.2f} ms / "
        f"{lists.median(('capped', 'loaded'), 'rps'):.0f} | reported |",
        "",
    ]
    return "\n".join(lines), ok


# driver -----------------------------------------------------------------------------------
def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    sql: SqlResults | None = None
    relaxed: PairedChat | None = None
    with harness.Rig("ap-spend-bench-") as rig:
        prices = {"AP_MODEL_PRICES": json.dumps(PRICES)}
        platform, provider = rig.scripted(args, MODEL, prices, worker=False)
        admins = {
            "capped": platform.token("u0", "admin", CAPPED_ORG),
            "uncapped": platform.token("n0", "admin", UNCAPPED_ORG),
        }
        print(f"seeding {args.events:,} usage events ({args.seed_mode})", flush=True)
        seeded = asyncio.run(seed_ledger(platform.pgdata, args))
        print(
            f"seeded in {seeded.seconds:.1f} s (+ VACUUM ANALYZE "
            f"{seeded.analyze_seconds:.1f} s), {seeded.daily_rows} days",
            flush=True,
        )
        caps = {"daily": CAP, "weekly": CAP, "monthly": CAP}
        save_settings(platform.url, admins["capped"], {"spendCaps": caps})
        save_settings(platform.url, admins["uncapped"], {"spendCaps": {}})
        agent = {"name": "Spend bench", "role": AGENT_ROLE, "model": f"openai:{MODEL}"}
        for config in CONFIGS:
            seeded.agents[config] = platform.create_agent(admins[config], agent)
        for i in range(EXTRA_AGENTS):
            other = {**agent, "name": f"Agent {i}", "description": f"Agent number {i}."}
            platform.create_agent(admins["capped"], other)
        urls = {
            "capped": f"{platform.url}/orgSettings",
            "uncapped": f"{platform.url}/orgSettings",
            "agents": f"{platform.url}/agents",
        }
        tokens = {**admins, "agents": admins["capped"]}
        for target in TARGETS:
            response = httpx.get(urls[target], headers=harness.bearer(tokens[target]))
            body = expect(response, 200)
            seeded.bodies[target] = len(response.content)
            if target == "capped":
                status = body["spendCapStatus"]
                require(set(status) == set(caps), f"spendCapStatus: {status}")
                for period, entry in status.items():
                    want = seeded.spent[period]
                    require(
                        abs(entry["spent"] - want) < 1e-6 and entry["cap"] == CAP,
                        f"{period}: spent {entry['spent']} != the ledger's {want}",
                    )
            elif target == "uncapped":
                require(body["spendCapStatus"] == {}, f"uncapped: {body['spendCapStatus']}")
            else:
                require(len(body["agents"]) == EXTRA_AGENTS + 1, "agents: wrong count")
        lists = harness.wrk_rounds(urls, tokens, LOADS, args)

        def chats(title: str) -> PairedChat:
            answer, title = content_text(args.tokens), f"Spend bench {title}"
            chat = PairedChat(platform, provider.url, seeded.agents, admins, answer, PROMPT, title)

            async def run() -> None:
                async with harness.chat_client() as client:
                    await chat.run(client, args.chat_warmup, args.chat_rounds, args.requests)

            asyncio.run(run())
            return chat

        chat = chats("chat")
        if args.async_phase:
            print("the same with synchronous_commit = off server-wide", flush=True)
            asyncio.run(synchronous_commit(platform.pgdata, False))
            try:
                relaxed = chats("async-commit chat")
                for config in CONFIGS:
                    chat.chats[config] += relaxed.chats[config]
            finally:
                asyncio.run(synchronous_commit(platform.pgdata, True))
        time.sleep(1.0)  # the last answers' settlements
        end = asyncio.run(leftovers(platform.pgdata))
        if args.sql_iterations:
            sql = asyncio.run(measure_sql(platform.pgdata, args))
    end["load"] = harness.load_average()
    return section(args, info, seeded, lists, chat, relaxed, sql, end)


def main() -> int:
    parser = harness.parser(
        __doc__, provider=True, rounds=3, duration=10.0, warmup=5.0, requests=200, seed=7
    )
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--days", type=int, default=90, help="the events' time span")
    parser.add_argument("--seed-mode", choices=("trigger", "bulk"), default="bulk")
    parser.add_argument("--chat-rounds", type=int, default=5)
    parser.add_argument("--chat-warmup", type=int, default=20)
    parser.add_argument(
        "--no-async-phase",
        dest="async_phase",
        action="store_false",
        help="skip the chats with synchronous_commit = off",
    )
    parser.add_argument("--sql-iterations", type=int, default=500, help="0 skips it")
    parser.add_argument("--sql-warmup", type=int, default=50)
    parser.add_argument(
        "--code-note", help="what code was measured, for the report (default: from git status)"
    )
    args = parser.parse_args()
    if min(args.events, args.rounds, args.chat_rounds, args.requests) < 1:
        parser.error("--events, --rounds, --chat-rounds and --requests must be at least 1")
    return harness.run(SECTION_TITLE, args, run, wrk=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
