"""The knowledge-base list endpoints in one process: CPU time per request of the service's ASGI
app and of the bare app (`bare_app.py`), called in turn on the data of `kb_endpoints.py`.

    .venv/bin/python bench/kb_profile.py [--requests 1500] [--rounds 10] [--no-write]

The log lines go to a writer that drops them: the write itself is the terminal's or the pipe's
cost, not the service's. How, and how to profile it with py-spy: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import harness
import kb_endpoints as kb
from harness import BenchError, median

SECTION_TITLE = "KB list endpoints in one process: CPU per request, service vs bare"
ENDPOINTS = ("page", "page_deep", "manage_small", "files", "manage")
Asgi = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


class _Discard:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        return None


def _scope(path: str, query: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(b"host", b"bench"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
    }


async def _call(app: Asgi, scope: dict[str, Any]) -> tuple[int, bytes]:
    """One request; its status and body."""
    status, body = 0, b""

    async def send(message: dict[str, Any]) -> None:
        nonlocal status, body
        if message["type"] == "http.response.start":
            status = message["status"]
        else:
            body += message.get("body", b"")

    await app(dict(scope, headers=list(scope["headers"])), _receive, send)
    return status, body


async def _cpu_per_request(app: Asgi, scope: dict[str, Any], count: int) -> float:
    """CPU time per request over `count` requests, every one of which must answer 200."""
    failed = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal failed
        if message["type"] == "http.response.start" and message["status"] != 200:
            failed += 1

    started = time.process_time()
    for _ in range(count):
        await app(dict(scope, headers=list(scope["headers"])), _receive, send)
    cpu = (time.process_time() - started) / count * 1e6
    if failed:
        raise BenchError(f"{failed} of {count} requests to {scope['path']} did not answer 200")
    return cpu


async def _receive() -> dict[str, Any]:
    return {"type": "http.request", "body": b"", "more_body": False}


async def measure(
    args: argparse.Namespace, env: dict[str, str], targets: dict[str, dict[str, Any]]
) -> dict[tuple[str, str], list[float]]:
    os.environ.update(env)
    import bare_app

    from entrypoints.config import Settings
    from entrypoints.database import resolve_database
    from entrypoints.http.app import create_app
    from entrypoints.logging import configure_logging

    settings = Settings.from_env()
    configure_logging(settings.log_format, settings.log_level)
    service = create_app(settings, resolve_database(settings))
    litestar = service.app  # type: ignore[attr-defined]
    for hook in litestar.on_startup:
        await hook(litestar)
    bare_lifespan = bare_app.lifespan(bare_app.app)
    await bare_lifespan.__aenter__()
    apps: dict[str, Asgi] = {"full": service, "bare": bare_app.app}
    stderr, sys.stderr = sys.stderr, _Discard()  # type: ignore[assignment]
    try:
        for endpoint, target in targets.items():
            bodies, sizes = [], []
            for server in kb.SERVERS:
                status, body = await _call(apps[server], target[server])
                if status != 200:
                    raise BenchError(f"{server} {endpoint}: status {status}: {body[:300]!r}")
                bodies.append(json.loads(body))
                sizes.append(len(body))
            difference = kb.first_difference(*bodies)
            if difference:
                raise BenchError(f"{endpoint}: bodies differ (service, bare) at {difference}")
            target["size"] = sizes[0]  # the service's
        # As `serve` does once the app is built (entrypoints.cli).
        gc.collect()
        gc.freeze()
        gc.set_threshold(20_000, 20, 20)
        results: dict[tuple[str, str], list[float]] = {}
        for endpoint, target in targets.items():
            for server in kb.SERVERS:  # warm-up
                await _cpu_per_request(apps[server], target[server], args.requests // 5)
            for round_ in range(args.rounds):
                for server in harness.alternate(kb.SERVERS, round_):
                    cpu = await _cpu_per_request(apps[server], target[server], args.requests)
                    results.setdefault((endpoint, server), []).append(cpu)
            full, bare = (median(results[(endpoint, s)]) for s in kb.SERVERS)
            print(f"{endpoint:13} full {full:7.0f} µs  bare {bare:7.0f} µs  {bare / full:.0%}")
    finally:
        sys.stderr = stderr
        await bare_lifespan.__aexit__(None, None, None)
        for hook in litestar.on_shutdown:
            await hook()
    return results


def section(
    results: dict[tuple[str, str], list[float]],
    targets: dict[str, dict[str, Any]],
    args: argparse.Namespace,
    info: dict[str, str],
) -> str:
    rows = [
        "| Endpoint | Body | full µs/request | bare µs/request | bare / full |",
        "|---|---:|---:|---:|---:|",
    ]
    for endpoint in targets:
        full, bare = (median(results[(endpoint, s)]) for s in kb.SERVERS)
        size = targets[endpoint]["size"] / 1024
        rows.append(
            f"| {kb.ENDPOINTS[endpoint]} | {size:.0f} KiB | {full:.0f} | {bare:.0f} | "
            f"{bare / full:.0%} |"
        )
    spread = [
        f"| {endpoint} | {server} | {harness.fmt(results[(endpoint, server)], 0)} |"
        for endpoint in targets
        for server in kb.SERVERS
    ]
    return "\n".join(
        [
            *harness.heading(SECTION_TITLE, "kb_profile.py"),
            f"- Machine: {harness.machine_line(info)}.",
            f"- Both apps in this process on the data of `kb_endpoints.py`, called through ASGI "
            f"{args.requests:,} times per round and endpoint, {args.rounds} rounds alternating "
            "between them after a warm-up; CPU time of this process per request (Python, "
            "asyncpg and the kernel's share of the socket calls; PostgreSQL's work is in its "
            "own processes, on the other CPU); medians over the rounds. The service as `serve` "
            "builds it (JSON access lines, to a writer that drops them), the bare app as "
            "`bare_app.py` serves it. No target of its own: the load test's 85% is under load, "
            "where PostgreSQL and wrk share the CPUs.",
            "",
            *rows,
            "",
            "Per round (µs per request):",
            "",
            "| Endpoint | Server | per round |",
            "|---|---|---|",
            *spread,
            "",
        ]
    )


def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    with harness.Rig("ap-profile-") as rig:
        platform = kb.start_serve(rig)
        orgs = (kb.ORG_ID, kb.SMALL_ORG_ID)
        tokens = {org: platform.token("u1", "admin", org) for org in orgs}
        print("seeding as kb_endpoints.py does")
        files_kb, big_kb = kb.seed(platform.url, tokens, platform.pgdata)
        cursor = kb.deep_cursor(platform.url, tokens[kb.ORG_ID], big_kb)
        page = f"kbId={big_kb}&limit={kb.PAGE}"
        queries = {
            "page": ("/kb/files", page, kb.ORG_ID),
            "page_deep": ("/kb/files", f"{page}&cursor={cursor}", kb.ORG_ID),
            "manage_small": ("/kb/manage", "", kb.SMALL_ORG_ID),
            "files": ("/kb/files", f"kbId={files_kb}", kb.ORG_ID),
            "manage": ("/kb/manage", "", kb.ORG_ID),
        }
        targets: dict[str, dict[str, Any]] = {}
        for endpoint in ENDPOINTS:
            path, query, org = queries[endpoint]
            bearer = [(b"authorization", f"Bearer {tokens[org]}".encode())]
            bare_query = "&".join(q for q in (query, f"org={org}") if q)
            targets[endpoint] = {
                "full": _scope(path, query, bearer),
                "bare": _scope(path, bare_query, []),
            }
        in_process = {
            **platform.env,
            "AP_DATABASE_URL": f"postgresql://postgres@/agent_platform?host={platform.pgdata}",
            "AP_LOCAL_MODEL_PRELOAD": "false",
            "BENCH_PG_HOST": str(platform.pgdata),
            "BENCH_ORG_ID": kb.ORG_ID,
        }
        results = asyncio.run(measure(args, in_process, targets))
    return section(results, targets, args, info), True


def main() -> int:
    parser = harness.parser(__doc__, requests=1500, rounds=10)
    return harness.run(SECTION_TITLE, parser.parse_args(), run)


if __name__ == "__main__":
    sys.exit(main())
