"""`POST /admin/bulkRemove` of 50 members, on the local directory and against a stand-in Clerk
Backend API (`tests/integration/clerk_server.py`) with 50 ms per call.

    .venv/bin/python bench/members.py [--iterations 20] [--warmup 2] [--latency 0.05]

The modes, the steps of an iteration, the targets and options: bench/README.md.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import Any

import harness
import httpx
from harness import ROOT, BenchError, Platform, expect, fmt, percentile

sys.path.insert(0, str(ROOT))  # tests.integration.clerk_server, the stand-in Clerk

from tests.integration.clerk_server import SECRET_KEY, ClerkServer

SECTION_TITLE = "Members: POST /admin/bulkRemove of 50, local directory and Clerk"
ORG_ID = harness.ORG_ID  # the organization of the tokens `Platform.token` issues
ADMIN = "user_admin"
MODES = ("local", "clerk", "clerk-nodelay")
TARGETS_MS = {"local": 200.0, "clerk": 1500.0, "clerk-nodelay": 1500.0}
DIRECT_CALLS = 4  # straight to the stand-in per iteration, after one left out
CLERK_CONCURRENCY = 5  # ClerkDirectory's default max_concurrency, as serve builds it


@dataclass
class Iteration:
    list_ms: float
    remove_ms: float
    remove_one_ms: float
    listed: int
    direct_ms: float = 0.0  # a DELETE (404) from the benchmark straight to the stand-in
    # Clerk mode: the stand-in's view of the 50-member removal.
    calls: Counter[str] = field(default_factory=Counter)
    max_in_flight: int = 0
    before_first_call_ms: float = 0.0  # request sent -> the first Clerk call arrived
    clerk_span_ms: float = 0.0  # the first call arrived -> the last call answered
    after_last_call_ms: float = 0.0  # the last call answered -> the response read


@dataclass
class Mode:
    name: str
    platform: Platform
    client: httpx.Client
    admin_headers: dict[str, str]
    clerk: ClerkServer | None = None
    direct: httpx.Client | None = None  # the benchmark's own client of the stand-in
    iterations: list[Iteration] = field(default_factory=list)


def seed(mode: Mode, user_ids: list[str]) -> dict[str, str]:
    """The members in the mode's directory; returns their tokens (local mode)."""
    tokens = {}
    for user_id in user_ids:
        if mode.clerk is not None:
            mode.clerk.add_member(ORG_ID, user_id)
            continue
        tokens[user_id] = mode.platform.token(user_id)
        expect(mode.client.get("/kb/manage", headers=harness.bearer(tokens[user_id])), 200)
    return tokens


def timed(mode: Mode, method: str, path: str, body: Any = None) -> tuple[float, float, Any]:
    """(monotonic start, monotonic end, JSON) of one request, the whole response read."""
    started = time.monotonic()
    response = mode.client.request(method, path, json=body, headers=mode.admin_headers)
    response.read()
    ended = time.monotonic()
    return started, ended, expect(response, 200)


def check_removed(body: Any, user_ids: list[str]) -> None:
    if body.get("successful") != len(user_ids) or body.get("failed") != 0:
        raise BenchError(f"bulkRemove of {len(user_ids)}: {str(body)[:500]}")


def iteration(mode: Mode, n: int, members: int, latency: float) -> Iteration:
    clerk = mode.clerk
    user_ids = [f"user_i{n:03d}m{j:02d}" for j in range(members)]
    tokens = seed(mode, user_ids)

    start, end, listed = timed(mode, "GET", "/admin/getUsersInOrg")
    list_ms = (end - start) * 1000
    ids = {m["id"] for m in listed}
    if not ids >= {*user_ids, ADMIN} or len(ids) != members + 1:
        raise BenchError(f"{mode.name}: getUsersInOrg listed {len(ids)}, not {members} + admin")

    calls_before = len(clerk.requests) if clerk else 0
    if clerk:
        clerk.max_in_flight = 0
    start, end, body = timed(mode, "POST", "/admin/bulkRemove", {"userIds": user_ids})
    check_removed(body, user_ids)
    result = Iteration(list_ms, remove_ms=(end - start) * 1000, remove_one_ms=0.0, listed=len(ids))
    if clerk is not None and mode.direct is not None:
        calls = clerk.requests[calls_before:]
        result.calls = Counter(f"{c.method} {_shape(c.path)}" for c in calls)
        result.max_in_flight = clerk.max_in_flight
        if calls:
            # `at` is taken after the stand-in's sleep, just before it answers.
            first_arrived = min(c.at for c in calls) - latency
            last_answered = max(c.at for c in calls)
            result.before_first_call_ms = (first_arrived - start) * 1000
            result.clerk_span_ms = (last_answered - first_arrived) * 1000
            result.after_last_call_ms = (end - last_answered) * 1000
        # Back to back on one kept-alive connection, as the directory's calls go; the first
        # after an idle spell is acknowledged at once by the client, so it is left out.
        path = f"{clerk.url}/v1/organizations/{ORG_ID}/memberships/user_none"
        times = []
        for _ in range(DIRECT_CALLS + 1):
            started = time.monotonic()
            direct = mode.direct.delete(path)
            direct.read()
            times.append((time.monotonic() - started) * 1000)
            if direct.status_code != 404:
                raise BenchError(f"the stand-in answered {direct.status_code} to a direct DELETE")
        result.direct_ms = statistics.mean(times[1:])

    one = f"user_i{n:03d}single"
    seed(mode, [one])
    start, end, body = timed(mode, "POST", "/admin/bulkRemove", {"userIds": [one]})
    check_removed(body, [one])
    result.remove_one_ms = (end - start) * 1000

    if clerk is None:
        refused = mode.client.get("/kb/manage", headers=harness.bearer(tokens[user_ids[0]]))
        if refused.status_code != 403:
            raise BenchError(f"a removed member's token got {refused.status_code}, not 403")
    elif set(clerk.memberships.get(ORG_ID, {})) != {ADMIN}:
        raise BenchError(f"the stand-in still holds {sorted(clerk.memberships[ORG_ID])[:5]}...")
    return result


def _shape(path: str) -> str:
    parts = path.split("/")
    if len(parts) >= 6 and parts[3] == ORG_ID and parts[4] == "memberships":
        parts[3], parts[5] = "{org}", "{user}"
    elif len(parts) >= 4 and parts[3] == ORG_ID:
        parts[3] = "{org}"
    return "/".join(parts)


# report -----------------------------------------------------------------------------------
def stats(values: list[float]) -> tuple[float, float, float]:
    return percentile(values, 50), percentile(values, 90), max(values)


def section(modes: dict[str, Mode], args: argparse.Namespace, info: dict[str, Any]) -> str:
    latency_ms = args.latency * 1000
    waves = math.ceil(args.members / CLERK_CONCURRENCY)
    lines = [
        *harness.heading(SECTION_TITLE, "members.py"),
        f"- Machine: {harness.machine_line(info['machine'])}; at the end load average "
        f"{info['load_end']}. `uptime` at start: `{info['uptime_start']}`; at the end: "
        f"`{info['uptime_end']}`. The platforms, their PostgreSQL servers, the stand-in "
        "Clerk servers and the client share these CPUs.",
        f"- Code measured: {info['code']}.",
        "- Platforms: one `agent-platform serve` per mode (one uvicorn worker on uvloop, litestar "
        f"{version('litestar')}, dishka {version('dishka')}, asyncpg {version('asyncpg')}, httpx "
        f"{version('httpx')}), each on its own temporary data dir (embedded PostgreSQL), "
        "`AP_WORKER_IN_PROCESS=false`. *local*: the default directory (members are rows, recorded "
        "by each member's first call). *clerk*: `AP_IDENTITY_DIRECTORY=clerk`, `AP_CLERK_API_URL` "
        "at `tests/integration/clerk_server.py`'s `ClerkServer` as the tests run it (Clerk's "
        f"Backend API shapes, a thread per connection, {latency_ms:.0f} ms slept in every call, "
        "inside the benchmark's process). *clerk-nodelay*: the same with a second `ClerkServer` "
        "whose handler sets `TCP_NODELAY` (`disable_nagle_algorithm`, set by the benchmark): the "
        "stand-in writes an answer's headers and its body in two sends, so on a kept-alive "
        "connection the body waits for the client's delayed ACK (~40 ms); the *direct* row below "
        f"is the mean of {DIRECT_CALLS} `DELETE`s (404) sent back to back on one kept-alive "
        "connection from the benchmark straight to each stand-in, after one left out (the first "
        "after an idle spell is acknowledged at once). Tokens from the platforms' own development "
        f"identity provider (`{ADMIN}` as `org:admin` of `{ORG_ID}`, each member its own).",
        f"- Per iteration and mode: {args.members} new members seeded (local: one `GET /kb/manage` "
        "with each member's token; clerk: added to the stand-in), then timed: `GET "
        f"/admin/getUsersInOrg` ({args.members} members + the admin), `POST /admin/bulkRemove` of "
        f"the {args.members} (checked: 200, `successful` = {args.members}), one more member seeded "
        "and `POST /admin/bulkRemove` of that one; untimed checks: local, a removed member's token "
        "gets 403; clerk, the stand-in's organization holds only the admin again. Times are the "
        "client's wall time from sending the request to the whole response read (httpx, one "
        f"keep-alive connection per platform). {args.warmup} warm-up iterations per mode, then "
        f"{args.iterations} measured; the modes rotate which goes first. p90 is nearest-rank.",
        "",
        "| Mode | Request | p50 (ms) | p90 (ms) | max (ms) |",
        "|---|---|---:|---:|---:|",
    ]
    for name, mode in modes.items():
        its = mode.iterations
        rows = [
            (f"`POST /admin/bulkRemove`, {args.members} members", [i.remove_ms for i in its]),
            ("`POST /admin/bulkRemove`, 1 member", [i.remove_one_ms for i in its]),
            (f"`GET /admin/getUsersInOrg`, {its[0].listed} members", [i.list_ms for i in its]),
        ]
        if mode.clerk is not None:
            rows.append(("direct: a `DELETE` to the stand-in", [i.direct_ms for i in its]))
        for label, values in rows:
            p50, p90, top = stats(values)
            lines.append(f"| {name} | {label} | {p50:.1f} | {p90:.1f} | {top:.1f} |")
    lines += ["", "Ratios and per-member cost (p50):", ""]
    for name, mode in modes.items():
        its = mode.iterations
        many = percentile([i.remove_ms for i in its], 50)
        one = percentile([i.remove_one_ms for i in its], 50)
        listing = percentile([i.list_ms for i in its], 50)
        lines.append(
            f"- {name}: bulkRemove of {args.members} = {many / one:.1f}x bulkRemove of 1 "
            f"and {many / listing:.1f}x getUsersInOrg; ({many:.1f} - {one:.1f}) / "
            f"{args.members - 1} = {(many - one) / (args.members - 1):.2f} ms per further member."
        )
    for name, mode in modes.items():
        if mode.clerk is None:
            continue
        its = mode.iterations
        calls = Counter[str]()
        for i in its:
            calls.update(i.calls)
        per = ", ".join(f"{n / len(its):g} `{k}`" for k, n in sorted(calls.items()))
        in_flight = sorted({i.max_in_flight for i in its})
        direct = percentile([i.direct_ms for i in its], 50)
        before = percentile([i.before_first_call_ms for i in its], 50)
        span = percentile([i.clerk_span_ms for i in its], 50)
        after = percentile([i.after_last_call_ms for i in its], 50)
        lines += [
            "",
            f"{name}: what one removal of {args.members} sends (the stand-in's record, per "
            f"iteration): {per}; nothing else (no read of the memberships or users). Most calls "
            f"in flight at once: {', '.join(map(str, in_flight))} (the directory's bound is "
            f"{CLERK_CONCURRENCY}). At {CLERK_CONCURRENCY} at a time the calls go in "
            f"ceil({args.members}/{CLERK_CONCURRENCY}) = {waves} waves: at least {waves} x "
            f"{latency_ms:.0f} = {waves * latency_ms:.0f} ms, or {waves} x {direct:.1f} = "
            f"{waves * direct:.0f} ms at the stand-in's measured per-call time (direct p50). "
            f"Where the time goes (p50 of each part): request sent -> the first call reached "
            f"the stand-in {before:.1f} ms; first call arrived -> last call answered "
            f"{span:.1f} ms ({span / waves:.1f} ms per wave); last call answered -> response "
            f"read {after:.1f} ms (the last answer's way back, the removals and audit entries "
            "written to PostgreSQL, the commit, the response).",
        ]
    lines += ["", "Per iteration (ms):", ""]
    for name, mode in modes.items():
        its = mode.iterations
        lines.append(f"- {name}, bulkRemove {args.members}: {fmt([i.remove_ms for i in its], 1)}")
        lines.append(f"- {name}, bulkRemove 1: {fmt([i.remove_one_ms for i in its], 1)}")
        lines.append(f"- {name}, getUsersInOrg: {fmt([i.list_ms for i in its], 1)}")
    lines += ["", "| Target | Measured (p50) | Result |", "|---|---:|---|"]
    for name, mode in modes.items():
        p50 = percentile([i.remove_ms for i in mode.iterations], 50)
        target = TARGETS_MS[name]
        where = {
            "local": "local directory",
            "clerk": f"Clerk stand-in as the tests run it ({latency_ms:.0f} ms slept per call, "
            f"{percentile([i.direct_ms for i in mode.iterations], 50):.0f} ms per call measured)",
            "clerk-nodelay": f"Clerk stand-in with `TCP_NODELAY` ({latency_ms:.0f} ms slept "
            f"per call, {percentile([i.direct_ms for i in mode.iterations], 50):.0f} ms per "
            "call measured)",
        }[name]
        lines.append(
            f"| `POST /admin/bulkRemove` of {args.members}, {where}: p50 < {target:.0f} ms "
            f"| {p50:.1f} ms | {harness.verdict(p50 < target)} |"
        )
    lines.append("")
    return "\n".join(lines)


# run --------------------------------------------------------------------------------------
def start_modes(args: argparse.Namespace, rig: harness.Rig) -> dict[str, Mode]:
    """A serve per mode, each with its own stand-in Clerk outside the local mode."""
    modes: dict[str, Mode] = {}
    for name in args.modes:
        env = {"AP_LOG_LEVEL": args.log_level}
        clerk = None
        if name != "local":
            clerk = ClerkServer(secret_key=SECRET_KEY, latency=0.0)
            rig.closing.append(clerk.close)
            # Each server has its own handler class: this one only.
            handler = clerk.httpd.RequestHandlerClass
            handler.disable_nagle_algorithm = name == "clerk-nodelay"  # type: ignore[attr-defined]
            clerk.add_member(ORG_ID, ADMIN, role="org:admin")
            env |= {
                "AP_IDENTITY_DIRECTORY": "clerk",
                "AP_CLERK_SECRET_KEY": SECRET_KEY,
                "AP_CLERK_API_URL": clerk.url,
            }
        platform = rig.serve(env, worker=False, name=name)
        client = httpx.Client(base_url=platform.url, timeout=60.0)
        rig.closing.append(client.close)
        admin = harness.bearer(platform.token(ADMIN, "admin"))
        mode = modes[name] = Mode(name, platform, client, admin, clerk)
        if clerk is not None:
            mode.direct = httpx.Client(headers=harness.bearer(SECRET_KEY), timeout=60.0)
            rig.closing.append(mode.direct.close)
        # The admin's first call records the admin (local directory).
        expect(client.get("/kb/manage", headers=admin), 200)
    return modes


def run(args: argparse.Namespace, machine: dict[str, str]) -> tuple[str, bool]:
    info: dict[str, Any] = {"machine": machine, "uptime_start": harness.uptime()}
    info["code"] = harness.code_state()
    with harness.Rig("ap-bench-members-") as rig:
        modes = start_modes(args, rig)
        for mode in modes.values():
            if mode.clerk is not None:
                mode.clerk.latency = args.latency
        for n in range(args.warmup + args.iterations):
            for mode in harness.rotate(list(modes.values()), n):
                result = iteration(mode, n, args.members, args.latency)
                measured = n >= args.warmup
                if measured:
                    mode.iterations.append(result)
                print(
                    f"{'iteration' if measured else 'warm-up  '} {n + 1:3d} {mode.name:13} "
                    f"bulkRemove {args.members} {result.remove_ms:7.1f} ms  "
                    f"1 {result.remove_one_ms:6.1f} ms  list {result.list_ms:6.1f} ms"
                    + (
                        f"  calls {sum(result.calls.values())} "
                        f"in flight {result.max_in_flight}  direct {result.direct_ms:.1f} ms"
                        if mode.clerk is not None
                        else ""
                    ),
                    flush=True,
                )
    info["uptime_end"] = harness.uptime()
    info["load_end"] = harness.load_average()
    ok = all(
        percentile([i.remove_ms for i in mode.iterations], 50) < TARGETS_MS[name]
        for name, mode in modes.items()
    )
    return section(modes, args, info), ok


def main() -> int:
    parser = harness.parser(__doc__, serve=True, warmup=2)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--members", type=int, default=50, help="members per removal (1-50)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per Clerk call")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    args = parser.parse_args()
    if not 2 <= args.members <= 50 or args.iterations < 1:
        parser.error("--members must be 2 to 50 and --iterations at least 1")
    return harness.run(SECTION_TITLE, args, run)


if __name__ == "__main__":
    sys.exit(main())
