"""`POST /admin/bulkRemove` of 50 members, on the local directory and against a stand-in Clerk
Backend API with 50 ms per call.

    .venv/bin/python bench/members.py [--iterations 20] [--warmup 2] [--latency 0.05]

Starts two `tests/integration/clerk_server.py` `ClerkServer`s (a local server with Clerk's
shapes, `--latency` seconds slept in every call, in this process): one as the tests run it, one
with `TCP_NODELAY` on its sockets (the stand-in writes an answer's headers and body in two
sends, so on a kept-alive connection Nagle's algorithm held the body until the client's delayed
ACK, ~40 ms more per call; the stand-in now sets `TCP_NODELAY` itself, so the two modes measure
the same, and BENCHMARKS.md's first "clerk" row predates that). Then three `agent-platform
serve` (`AP_WORKER_IN_PROCESS=false`), each on its own temporary data dir: *local* with the
default local directory, *clerk* and *clerk-nodelay* with `AP_IDENTITY_DIRECTORY=clerk`
pointing at one stand-in each. Then, for `--iterations` iterations (after `--warmup` unrecorded
ones), the modes rotating which goes first, in each mode:

1. seed `--members` new members: local, each calls `GET /kb/manage` once with its own token
   (the just-in-time member record); Clerk, each added to the stand-in's organization;
2. `GET /admin/getUsersInOrg` (the members and the admin), timed: a baseline;
3. `POST /admin/bulkRemove` of those members, timed (client wall time, request sent to the
   whole response read), checked: 200, `successful` = all; then in Clerk mode the calls the
   stand-in received during it (methods, most in flight at once, when the first began and the
   last ended), and 1 + 4 calls back to back straight from the benchmark to the stand-in
   (the mean of the last 4: its real per-call time);
4. one more member seeded, and `POST /admin/bulkRemove` of that one, timed: the fixed cost;
5. checks, untimed: local, a removed member's token gets 403 on `GET /kb/manage`; Clerk, the
   stand-in's organization holds only the admin again.

Targets (issue 14): p50 under 200 ms on the local directory, under 1.5 s against the Clerk
stand-ins. The result goes to stdout and to this benchmark's section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
from chat_common import Platform
from common import command_line, machine, machine_line, percentile
from kb_endpoints import ROOT, BenchError, report, tail

sys.path.insert(0, str(ROOT))  # tests.integration.clerk_server, the stand-in Clerk

from tests.integration.clerk_server import SECRET_KEY, ClerkServer

from adapters.identity.dev_provider import DevIdentityProvider

SECTION_TITLE = "Members: POST /admin/bulkRemove of 50, local directory and Clerk"
ORG_ID = "org_bench"
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
    issuer: DevIdentityProvider
    client: httpx.Client
    admin_headers: dict[str, str]
    clerk: ClerkServer | None = None
    direct: httpx.Client | None = None  # the benchmark's own client of the stand-in
    iterations: list[Iteration] = field(default_factory=list)


def token(mode: Mode, user_id: str, role: str = "member") -> str:
    return mode.issuer.issue(user_id=user_id, org_id=ORG_ID, role=role, ttl=86400)


def expect_json(response: httpx.Response, status: int) -> Any:
    if response.status_code != status:
        raise BenchError(
            f"{response.request.method} {response.request.url} -> {response.status_code}: "
            f"{response.text[:500]}"
        )
    return response.json()


def seed(mode: Mode, user_ids: list[str]) -> dict[str, str]:
    """The members in the mode's directory; returns their tokens (local mode)."""
    tokens = {}
    for user_id in user_ids:
        if mode.clerk is not None:
            mode.clerk.add_member(ORG_ID, user_id)
            continue
        tokens[user_id] = token(mode, user_id)
        response = mode.client.get(
            "/kb/manage", headers={"Authorization": f"Bearer {tokens[user_id]}"}
        )
        expect_json(response, 200)
    return tokens


def timed(mode: Mode, method: str, path: str, body: Any = None) -> tuple[float, float, Any]:
    """(monotonic start, monotonic end, JSON) of one request, the whole response read."""
    started = time.monotonic()
    response = mode.client.request(method, path, json=body, headers=mode.admin_headers)
    response.read()
    ended = time.monotonic()
    return started, ended, expect_json(response, 200)


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
    result = Iteration(list_ms=list_ms, remove_ms=(end - start) * 1000, remove_one_ms=0.0,
                       listed=len(ids))  # fmt: skip
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
        refused = mode.client.get(
            "/kb/manage", headers={"Authorization": f"Bearer {tokens[user_ids[0]]}"}
        )
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


def fmt(values: list[float], digits: int = 1) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def uptime() -> str:
    done = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip()


def section(modes: dict[str, Mode], args: argparse.Namespace, info: dict[str, Any]) -> str:
    latency_ms = args.latency * 1000
    waves = math.ceil(args.members / CLERK_CONCURRENCY)
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with `{command_line('members.py')}` "
        "(from the repository root).",
        "",
        f"- Machine: {machine_line(info['machine'])}; at the end load average "
        f"{info['load_end']}. `uptime` at start: `{info['uptime_start']}`; at the end: "
        f"`{info['uptime_end']}`. The platforms, their PostgreSQL servers, the stand-in "
        "Clerk servers and the client share these CPUs.",
        f"- Code measured: HEAD {info['commit']} ({info['tree']}).",
        f"- Platforms: one `agent-platform serve` per mode (one uvicorn worker on uvloop, "
        f"litestar {version('litestar')}, dishka {version('dishka')}, asyncpg "
        f"{version('asyncpg')}, httpx {version('httpx')}), each on its own temporary data dir "
        "(embedded PostgreSQL), `AP_WORKER_IN_PROCESS=false`. *local*: the default directory "
        "(members are rows, recorded by each member's first call). *clerk*: "
        "`AP_IDENTITY_DIRECTORY=clerk`, `AP_CLERK_API_URL` at `tests/integration/"
        "clerk_server.py`'s `ClerkServer` as the tests run it (Clerk's Backend API shapes, a "
        f"thread per connection, {latency_ms:.0f} ms slept in every call, inside the "
        "benchmark's process). *clerk-nodelay*: the same with a second `ClerkServer` whose "
        "handler sets `TCP_NODELAY` (`disable_nagle_algorithm`, set by the benchmark): the "
        "stand-in writes an answer's headers and its body in two sends, so on a kept-alive "
        "connection the body waits for the client's delayed ACK (~40 ms); the *direct* row "
        f"below is the mean of {DIRECT_CALLS} `DELETE`s (404) sent back to back on one "
        "kept-alive connection from the benchmark straight to each stand-in, after one left "
        "out (the first after an idle spell is acknowledged at once). Tokens from the "
        f"platforms' own development identity provider (`{ADMIN}` as `org:admin` of "
        f"`{ORG_ID}`, each member its own).",
        f"- Per iteration and mode: {args.members} new members seeded (local: one `GET "
        "/kb/manage` with each member's token; clerk: added to the stand-in), then timed: "
        f"`GET /admin/getUsersInOrg` ({args.members} members + the admin), `POST "
        f"/admin/bulkRemove` of the {args.members} (checked: 200, `successful` = "
        f"{args.members}), one more member seeded and `POST /admin/bulkRemove` of that one; "
        "untimed checks: local, a removed member's token gets 403; clerk, the stand-in's "
        "organization holds only the admin again. Times are the client's wall time from "
        "sending the request to the whole response read (httpx, one keep-alive connection "
        f"per platform). {args.warmup} warm-up iterations per mode, then {args.iterations} "
        "measured; the modes rotate which goes first. p90 is nearest-rank.",
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
        lines.append(f"- {name}, bulkRemove {args.members}: {fmt([i.remove_ms for i in its])}")
        lines.append(f"- {name}, bulkRemove 1: {fmt([i.remove_one_ms for i in its])}")
        lines.append(f"- {name}, getUsersInOrg: {fmt([i.list_ms for i in its])}")
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
        verdict = "PASS" if p50 < target else "FAIL"
        lines.append(
            f"| `POST /admin/bulkRemove` of {args.members}, {where}: p50 < {target:.0f} ms "
            f"| {p50:.1f} ms | {verdict} |"
        )
    lines.append("")
    return "\n".join(lines)


# run --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    info: dict[str, Any] = {"machine": machine(), "uptime_start": uptime()}
    dirty = git("status", "--porcelain", "--", "src")
    info["commit"] = git("rev-parse", "--short", "HEAD")
    info["tree"] = "src/ as committed" if not dirty else f"src/ with uncommitted changes: {dirty!r}"
    modes: dict[str, Mode] = {}
    clerks: list[ClerkServer] = []
    with tempfile.TemporaryDirectory(prefix="ap-bench-members-") as tmp:
        try:
            for name in args.modes:
                data_dir = Path(tmp) / name
                data_dir.mkdir()
                env = {"AP_WORKER_IN_PROCESS": "false", "AP_LOG_LEVEL": args.log_level}
                clerk = None
                if name != "local":
                    clerk = ClerkServer(secret_key=SECRET_KEY, latency=0.0)
                    clerks.append(clerk)
                    # Each server has its own handler class: this one only.
                    handler = clerk.httpd.RequestHandlerClass
                    nodelay = name == "clerk-nodelay"
                    handler.disable_nagle_algorithm = nodelay  # type: ignore[attr-defined]
                    clerk.add_member(ORG_ID, ADMIN, role="org:admin")
                    env |= {
                        "AP_IDENTITY_DIRECTORY": "clerk",
                        "AP_CLERK_SECRET_KEY": SECRET_KEY,
                        "AP_CLERK_API_URL": clerk.url,
                    }
                print(f"starting agent-platform serve ({name}, data dir {data_dir})", flush=True)
                platform = Platform.start(data_dir, env)
                issuer = DevIdentityProvider(data_dir / "dev-idp" / "signing-key.pem")
                mode = Mode(name, platform, issuer, httpx.Client(base_url=platform.url,
                            timeout=60.0), {}, clerk)  # fmt: skip
                if clerk is not None:
                    mode.direct = httpx.Client(
                        headers={"Authorization": f"Bearer {SECRET_KEY}"}, timeout=60.0
                    )
                modes[name] = mode
                mode.admin_headers = {"Authorization": f"Bearer {token(mode, ADMIN, 'admin')}"}
                # The admin's first call records the admin (local directory).
                expect_json(mode.client.get("/kb/manage", headers=mode.admin_headers), 200)
            for clerk in clerks:
                clerk.latency = args.latency
            for n in range(args.warmup + args.iterations):
                order = list(modes.values())
                shift = n % len(order)
                for mode in order[shift:] + order[:shift]:
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
        except BaseException:
            for mode in modes.values():
                print(
                    f"--- serve ({mode.name}) log (tail) ---\n{tail(mode.platform.process.log)}",
                    file=sys.stderr,
                )
            raise
        finally:
            for mode in modes.values():
                mode.client.close()
                if mode.direct is not None:
                    mode.direct.close()
                mode.platform.stop()
            for clerk in clerks:
                clerk.close()
    info["uptime_end"] = uptime()
    info["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = section(modes, args, info)
    ok = all(
        percentile([i.remove_ms for i in mode.iterations], 50) < TARGETS_MS[name]
        for name, mode in modes.items()
    )
    return report(SECTION_TITLE, text, ok, write=not args.no_write)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--members", type=int, default=50, help="members per removal (1-50)")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per Clerk call")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--log-level", default="info", help="the platforms' AP_LOG_LEVEL")
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    args = parser.parse_args()
    if not 2 <= args.members <= 50 or args.iterations < 1:
        parser.error("--members must be 2 to 50 and --iterations at least 1")
    try:
        return run(args)
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
