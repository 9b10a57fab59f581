"""`agent-platform`: serve, migrate, token, knowledge-base and skill commands that run the same
use cases as the HTTP app through the same container."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import contextlib
import faulthandler
import gc
import json
import logging
import mimetypes
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import uvloop
from dishka import AsyncContainer

from adapters.postgres.migrations import migrate
from application.ports.object_storage import ObjectStorage
from application.use_cases.associate_file import AssociateFile, AssociateFileCommand
from application.use_cases.create_knowledge_base import (
    CreateKnowledgeBase,
    CreateKnowledgeBaseCommand,
)
from application.use_cases.create_upload import CreateUpload, CreateUploadCommand
from application.use_cases.list_files import ListFiles, ListFilesQuery
from application.use_cases.list_knowledge_bases import ListKnowledgeBases, ListKnowledgeBasesQuery
from domain.errors import DomainError
from domain.files import KnowledgeBaseFile, ProcessingStatus
from domain.identity import ADMIN_ROLE, Caller, Identity
from domain.knowledge_bases import EMAIL_SOURCE, KB_NOT_FOUND, parse_kb_id
from entrypoints.banner import when_listening
from entrypoints.cli_skills import run_skills
from entrypoints.cli_tasks import add_task_commands, run_tasks
from entrypoints.cli_tools import add_tool_commands, run_tools
from entrypoints.config import ConfigError, Settings
from entrypoints.database import Database, resolve_database
from entrypoints.extras import missing_extras
from entrypoints.http.knowledge_base_schemas import KnowledgeBaseFileOut
from entrypoints.logging import configure_logging
from entrypoints.wiring import dev_identity_provider, make_container
from entrypoints.worker.jobs import build_worker
from entrypoints.worker.process import run_worker, serve_with_worker


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-platform", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="migrate, then serve HTTP")
    serve.add_argument("--host", help="listen address (default AP_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="listen port (default AP_PORT or 8000)")

    commands.add_parser("migrate", help="upgrade the database schema")

    worker = commands.add_parser("worker", help="process queued jobs (file processing)")
    worker.add_argument(
        "--concurrency", type=int, help="jobs at once (default AP_WORKER_CONCURRENCY or 2)"
    )

    token = commands.add_parser("token", help="print a development bearer token")
    token.add_argument("--org", required=True, help="organization id")
    token.add_argument("--user", required=True, help="user id")
    token.add_argument("--role", choices=("admin", "member"), default="member")
    token.add_argument("--email")
    token.add_argument("--ttl", type=int, default=3600, help="lifetime in seconds")

    kb = commands.add_parser("kb", help="knowledge bases").add_subparsers(
        dest="kb_command", required=True
    )
    for name, help_text in (
        ("create", "create a knowledge base"),
        ("list", "list knowledge bases"),
        ("add-file", "upload a file and associate it with a knowledge base"),
    ):
        sub = kb.add_parser(name, help=help_text)
        sub.add_argument("--org", required=True, help="organization id to act in")
        sub.add_argument("--user", default="cli", help="user id to act as (default: cli)")
        if name == "create":
            sub.add_argument("--name", required=True)
            sub.add_argument("--description")
            sub.add_argument("--embedding-model")
            sub.add_argument(
                "--source",
                choices=(EMAIL_SOURCE,),
                help="email: give it an address that files what is sent to it "
                "(needs AP_INBOUND_EMAIL_DOMAIN)",
            )
        if name == "add-file":
            sub.add_argument("paths", type=Path, nargs="+", help="files, or folders of files")
            sub.add_argument("--kb", required=True, help="knowledge base id")
            sub.add_argument(
                "--no-wait", action="store_true", help="return once the files are queued"
            )
    skills = commands.add_parser("skills", help="skills (Agent Skills bundles)").add_subparsers(
        dest="skills_command", required=True
    )
    imports = skills.add_parser("import", help="import skills from folders or zip archives")
    imports.add_argument(
        "paths", type=Path, nargs="+", help="zip archives, skill folders, or folders of them"
    )
    listing = skills.add_parser("list", help="list the organization's active skills")
    listing.add_argument("--json", action="store_true", help="print the records as JSON")
    for sub in (imports, listing):
        sub.add_argument("--org", required=True, help="organization id to act in")
        sub.add_argument("--user", default="cli", help="user id to act as (default: cli)")
    add_task_commands(commands)
    add_tool_commands(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = Settings.from_env()
    except ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    configure_logging(settings.log_format, settings.log_level)
    if args.command in ("serve", "worker"):
        # A crash in native code prints every thread's Python stack before the process dies.
        faulthandler.enable()
    if args.command == "token":
        return _token(settings, args)
    problems = missing_extras(
        settings, models=args.command not in ("migrate", "skills", "tasks", "tools")
    )
    if problems:
        print(ConfigError(problems), file=sys.stderr)
        return 2
    if args.command == "serve":
        return _serve(settings, args)
    if args.command == "worker":
        return run_worker(settings, args.concurrency)
    database = resolve_database(settings)
    if args.command == "migrate":
        asyncio.run(migrate(database.owner_url))
        print("database schema is up to date")
        return 0
    if args.command == "skills":
        return asyncio.run(run_skills(settings, database, args))
    if args.command == "tasks":
        return asyncio.run(run_tasks(settings, database, args))
    if args.command == "tools":
        return asyncio.run(run_tools(settings, database, args))
    return asyncio.run(_kb(settings, database, args))


def _token(settings: Settings, args: argparse.Namespace) -> int:
    if not settings.dev_identity:
        print(
            "token: AP_AUTH_JWKS_URL is set; tokens come from your identity provider",
            file=sys.stderr,
        )
        return 2
    provider = dev_identity_provider(settings)
    print(
        provider.issue(
            user_id=args.user, org_id=args.org, role=args.role, email=args.email, ttl=args.ttl
        )
    )
    return 0


def _serve(settings: Settings, args: argparse.Namespace) -> NoReturn:
    import uvicorn

    from entrypoints.http.app import create_litestar, served
    from entrypoints.http.server import bounded_protocol

    overrides: dict[str, Any] = {}
    if args.host:
        overrides["host"] = args.host
    if args.port:
        overrides["port"] = args.port
    if overrides:
        settings = Settings(**{**_fields(settings), **overrides})
    database = resolve_database(settings)
    asyncio.run(migrate(database.owner_url))
    app = create_litestar(settings, database)
    # Everything built at start-up lives as long as the process: keep it out of the cyclic
    # collector's scans, and collect young objects less often (listings allocate many).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    # uvicorn re-raises SIGTERM once it has shut down gracefully; exiting normally instead lets
    # the exit hooks run, which stop the embedded database.
    signal.signal(signal.SIGTERM, _exit_normally)
    # httptools with bounds on each request's head (431 past 64 KiB, 408 past
    # AP_HEADER_TIMEOUT) and on open connections, which neither llhttp nor uvicorn sets.
    config = uvicorn.Config(
        served(app),
        host=settings.host,
        port=settings.port,
        log_config=None,
        access_log=False,
        http=bounded_protocol(settings.header_timeout, settings.max_connections),
        callback_notify=when_listening(settings, app),  # the ready banner, once it listens
    )
    try:
        uvloop.run(serve_with_worker(config, settings, database, app.state.dishka_container))
    except SystemExit as stop:
        _end_now(stop.code if isinstance(stop.code, int) else 1)
    _end_now(0)


def _end_now(code: int) -> NoReturn:
    """End `serve` at once: its exit hooks first (they stop the embedded database), without
    the interpreter's wait for a thread still loading the search's models (torch's imports
    take seconds), which would hold the exit past the shutdown bound."""
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _exit_normally(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


def _fields(settings: Settings) -> dict[str, Any]:
    return {name: getattr(settings, name) for name in settings.__dataclass_fields__}


async def _kb(settings: Settings, database: Database, args: argparse.Namespace) -> int:
    await migrate(database.owner_url)
    container = make_container(settings, database)
    identity = Identity(user_id=args.user, org_id=args.org, role=ADMIN_ROLE)
    try:
        async with container(context={Identity: identity}) as request:
            caller = await request.get(Caller)
            return await _run_kb(request, caller, args)
    except DomainError as error:
        print(f"error: {error.message}", file=sys.stderr)
        for detail in error.details:
            print(f"  {detail}", file=sys.stderr)
        return 1
    finally:
        await container.close()


async def _run_kb(request: AsyncContainer, caller: Caller, args: argparse.Namespace) -> int:
    if args.kb_command == "create":
        create = await request.get(CreateKnowledgeBase)
        summary = await create.execute(
            CreateKnowledgeBaseCommand.parse(
                caller=caller,
                name=args.name,
                description=args.description,
                embedding_model=args.embedding_model,
                source=args.source,
            )
        )
        kb = summary.knowledge_base
        created = {"id": kb.id, "name": kb.name, "embeddingModel": kb.embedding_model}
        if kb.inbound_email_address is not None:
            created["inboundEmailAddress"] = kb.inbound_email_address
        print(json.dumps(created))
        return 0
    if args.kb_command == "list":
        listing = await request.get(ListKnowledgeBases)
        for s in await listing.execute(ListKnowledgeBasesQuery(caller=caller)):
            kb = s.knowledge_base
            columns = [kb.id, kb.name, f"{s.file_count} file(s)", f"{s.total_size} B", s.status]
            if kb.inbound_email_address is not None:
                columns.append(kb.inbound_email_address)
            print("\t".join(map(str, columns)))
        return 0
    return await _add_files(request, caller, args)


def _expand(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.is_file()))
        else:
            files.append(path)
    return files


async def _add_files(request: AsyncContainer, caller: Caller, args: argparse.Namespace) -> int:
    """Upload and associate each file, then follow them to a terminal state."""
    from rich.console import Console

    console = Console(stderr=True)
    kb_id = parse_kb_id(args.kb)
    added: list[KnowledgeBaseFile] = []
    failed = 0
    for path in _expand(args.paths):
        try:
            added.append(await _add_file(request, caller, path, kb_id))
        except OSError as error:
            failed += 1
            console.print(f"[red]cannot read {path}: {error.strerror}[/red]")
        except DomainError as error:
            if not added and error.message == KB_NOT_FOUND:
                raise
            failed += 1
            console.print(f"[red]{path}: {error.message}[/red]")
    if not added:
        print("error: no file was added", file=sys.stderr)
        return 1
    if args.no_wait:
        for record in added:
            print(
                json.dumps(
                    {
                        "id": record.id,
                        "fileId": record.file_id,
                        "fileName": record.file_name,
                        "processingStatus": record.processing_status.value,
                    }
                )
            )
        return 1 if failed else 0
    settings = await request.get(Settings)
    database = await request.get(Database)
    final = await _follow(settings, database, caller, kb_id, added, console)
    _summary(final, console)
    ok = all(f.processing_status == ProcessingStatus.COMPLETED for f in final)
    return 0 if ok and not failed else 1


async def _follow(
    settings: Settings,
    database: Database,
    caller: Caller,
    kb_id: int,
    added: list[KnowledgeBaseFile],
    console: Any,
) -> list[KnowledgeBaseFileOut]:
    """Poll the files until each is completed or failed, with a progress bar; on the embedded
    default a worker runs in this process meanwhile, so nothing else has to be running."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    wanted = {record.id for record in added}
    worker = container = running = None
    if settings.worker_in_process:
        worker, container = build_worker(settings, database)
        running = asyncio.create_task(worker.run())
    watcher = make_container(settings, database)
    identity = Identity(user_id=caller.user_id, org_id=caller.org_id, role=caller.role)
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            task = progress.add_task("processing", total=len(wanted))
            while True:
                async with watcher(context={Identity: identity}) as scope:
                    listing = await scope.get(ListFiles)
                    page = await listing.execute(
                        ListFilesQuery(caller=caller, kb_id=kb_id, view=KnowledgeBaseFileOut)
                    )
                mine = [f for f in page.files if f.id in wanted]
                done = sum(1 for f in mine if ProcessingStatus(f.processing_status).is_terminal)
                progress.update(task, completed=done)
                if done == len(mine):
                    return mine
                if running is not None and running.done():
                    running.result()
                await asyncio.sleep(0.5)
    finally:
        await watcher.close()
        if worker is not None and running is not None and container is not None:
            worker.stop()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(running, timeout=30)
            await container.close()


def _summary(files: list[KnowledgeBaseFileOut], console: Any) -> None:
    from rich.table import Table

    table = Table(title="Files")
    for column in ("id", "file", "status", "size", "error"):
        table.add_column(column)
    for f in sorted(files, key=lambda f: f.id):
        style = "green" if f.processing_status == ProcessingStatus.COMPLETED else "red"
        table.add_row(
            str(f.id),
            f.file_name,
            f"[{style}]{f.processing_status}[/{style}]",
            str(f.file_size or ""),
            f.processing_error or "",
        )
    console.print(table)


async def _add_file(
    request: AsyncContainer, caller: Caller, path: Path, kb_id: int
) -> KnowledgeBaseFile:
    data = await asyncio.to_thread(path.read_bytes)
    content_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    presign = await request.get(CreateUpload)
    prepared = await presign.execute(
        CreateUploadCommand.parse(
            caller=caller, file_name=path.name, content_type=content_type, file_size=len(data)
        )
    )
    storage = await request.get(ObjectStorage)
    await storage.put(prepared.file_key, data, content_type=content_type)
    associate = await request.get(AssociateFile)
    return await associate.execute(
        AssociateFileCommand.parse(
            caller=caller,
            kb_id=kb_id,
            file_id=prepared.file_id,
            file_name=path.name,
            file_key=prepared.file_key,
            content_key=prepared.content_key,
            content_type=content_type,
            file_size=len(data),
        )
    )


if __name__ == "__main__":
    sys.exit(main())
