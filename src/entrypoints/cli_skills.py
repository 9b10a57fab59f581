"""`agent-platform skills import` and `skills list`: the organization's skills from the command
line, through the same use cases and container as `/skills/import` and `/skills/manage`.

Each PATH to import is a zip archive (read exactly as `/skills/import` reads an upload), a
skill folder (one holding SKILL.md: zipped in memory under its own name, so the skill's
`name` must equal the folder's), or a folder of skill folders, each imported in turn. In a
folder, hidden files and folders (`.git`, `.DS_Store`, …) are left out and a symbolic link is
refused, as the archive reader refuses one in a zip. Every skill is imported in its own scope
(its own transaction): one failing does not stop the others. Progress and the summary go to
standard error; the exit code is 0 when every skill was imported, 1 when any failed and 2 for
a PATH that is missing or holds no skill (nothing is imported then).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dishka import AsyncContainer

from adapters.postgres.migrations import migrate
from application.use_cases.create_skill import SkillView
from application.use_cases.import_skill import ImportSkill, ImportSkillCommand
from application.use_cases.list_skills import ListSkills, ListSkillsQuery
from domain.errors import DomainError, Invalid, PayloadTooLarge, field_error
from domain.identity import ADMIN_ROLE, Caller, Identity
from domain.skills import SKILL_FILE, SkillLimits
from entrypoints.config import Settings
from entrypoints.database import Database
from entrypoints.wiring import make_container

INVALID_FOLDER = "Invalid skill folder"
DESCRIPTION_SHOWN = 60


class UsageError(Exception):
    """A PATH that cannot be imported at all: missing, or holding no skill."""


@dataclass(frozen=True, slots=True)
class Source:
    """One skill to import: a zip archive or a skill folder, named as the user gave it."""

    path: Path
    folder: bool


async def run_skills(settings: Settings, database: Database, args: argparse.Namespace) -> int:
    """Run `skills import` or `skills list` as `args` say; the process's exit code."""
    sources: list[Source] = []
    if args.skills_command == "import":
        try:
            sources = find_sources(args.paths)
        except UsageError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    await migrate(database.owner_url)
    container = make_container(settings, database)
    identity = Identity(user_id=args.user, org_id=args.org, role=ADMIN_ROLE)
    try:
        if args.skills_command == "list":
            return await _list(container, identity, as_json=args.json)
        return await _import_all(container, identity, sources)
    except DomainError as error:
        _report(f"error: {error.message}", error)
        return 1
    finally:
        await container.close()


def find_sources(paths: list[Path]) -> list[Source]:
    """The skills the PATHs name, in order: a file is an archive, a folder holding SKILL.md a
    skill, another folder the skill folders directly in it. `UsageError` for a PATH that does
    not exist or a folder with no skill in it."""
    sources: list[Source] = []
    for path in paths:
        try:
            sources.extend(_sources_in(path))
        except OSError as error:
            raise UsageError(f"{path}: {error.strerror or error}") from None
    return sources


def _sources_in(path: Path) -> list[Source]:
    if path.is_file():
        return [Source(path, folder=False)]
    if not path.is_dir():
        problem = (
            "neither a zip archive nor a folder" if path.exists() else "no such file or folder"
        )
        raise UsageError(f"{path}: {problem}")
    if (path / SKILL_FILE).exists():
        return [Source(path, folder=True)]
    children = [
        Source(child, folder=True)
        for child in sorted(path.iterdir())
        if not _hidden(child.name) and child.is_dir() and (child / SKILL_FILE).exists()
    ]
    if not children:
        raise UsageError(f"{path}: no {SKILL_FILE} in this folder or in its folders")
    return children


async def _import_all(container: AsyncContainer, identity: Identity, sources: list[Source]) -> int:
    console = _console()
    limits = await container.get(SkillLimits)
    imported = failed = 0
    for number, source in enumerate(sources, start=1):
        step = _escape(f"[{number}/{len(sources)}]")
        try:
            archive = await asyncio.to_thread(archive_of, source, limits)
            view = await _import(container, identity, archive)
        except DomainError as error:
            failed += 1
            console.print(
                f"{step} [red]failed[/red]   {_escape(f'{source.path}: {error.message}')}"
            )
            for detail in error.details:
                console.print(f"           {_escape(_detail(detail))}")
        except OSError as error:
            failed += 1
            reason = error.strerror or str(error)
            where = error.filename or source.path
            console.print(f"{step} [red]failed[/red]   {_escape(f'cannot read {where}: {reason}')}")
        else:
            imported += 1
            skill = view.skill
            line = (
                f"{skill.manifest.name} (id {skill.id}): version {skill.version}, "
                f"{_files(skill.file_count)}  <- {source.path}"
            )
            console.print(f"{step} [green]imported[/green] {_escape(line)}")
    style = "red" if failed else "green"
    console.print(f"[{style}]imported {imported}, failed {failed}[/{style}]")
    return 1 if failed else 0


async def _import(container: AsyncContainer, identity: Identity, archive: bytes) -> SkillView:
    async with container(context={Identity: identity}) as request:
        caller = await request.get(Caller)
        use_case = await request.get(ImportSkill)
        return await use_case.execute(ImportSkillCommand(caller=caller, archive=archive))


async def _list(container: AsyncContainer, identity: Identity, *, as_json: bool) -> int:
    async with container(context={Identity: identity}) as request:
        caller = await request.get(Caller)
        skills = await (await request.get(ListSkills)).execute(ListSkillsQuery(caller=caller))
    if as_json:
        import msgspec

        from entrypoints.http.skill_schemas import SkillOut

        print(msgspec.json.encode([SkillOut.of(s) for s in skills]).decode())
        return 0
    for skill in skills:
        manifest = skill.manifest
        print(
            f"{skill.id}\t{manifest.name}\tv{skill.version}\t{_files(skill.file_count)}\t"
            f"{shorten(manifest.description)}"
        )
    return 0


def archive_of(source: Source, limits: SkillLimits) -> bytes:
    """The zip archive to import: the file's bytes, or the folder zipped in memory."""
    if not source.folder:
        if source.path.stat().st_size > limits.max_total_bytes:
            raise PayloadTooLarge(f"A skill may hold at most {limits.max_total_bytes} bytes")
        return source.path.read_bytes()
    return zip_folder(source.path, limits)


def zip_folder(folder: Path, limits: SkillLimits) -> bytes:
    """`folder` as a zip archive whose single top-level folder has `folder`'s name, hidden
    entries left out. `Invalid` for a symbolic link or a special file in it, and for more
    files or bytes than a skill may hold (found before everything is read)."""
    top = Path(os.path.normpath(folder.absolute())).name
    prefix = f"{top}/" if top else ""
    buffer = io.BytesIO()
    count = total = 0
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in _members(folder):
            relative = path.relative_to(folder).as_posix()
            if path.is_symlink():
                raise _refuse(f"{relative} is a symbolic link; a skill holds files only")
            if not path.is_file():
                raise _refuse(f"{relative} is not a regular file")
            count += 1
            if count > limits.max_files:
                raise _refuse(f"holds more than {limits.max_files} files")
            total += path.stat().st_size
            if total > limits.max_total_bytes:
                raise PayloadTooLarge(f"A skill may hold at most {limits.max_total_bytes} bytes")
            archive.write(path, prefix + relative)
    return buffer.getvalue()


def _members(folder: Path) -> Iterator[Path]:
    """Every entry below `folder` that is not a folder (links to folders included), by path;
    hidden files and folders left out, links never followed."""
    for root, folders, files in os.walk(folder, onerror=_raise):
        here = Path(root)
        links = [name for name in folders if (here / name).is_symlink()]
        folders[:] = sorted(n for n in folders if not _hidden(n) and n not in links)
        for name in sorted([*files, *links]):
            if not _hidden(name):
                yield here / name


def shorten(text: str, width: int = DESCRIPTION_SHOWN) -> str:
    """`text` on one line, cut to `width` characters with an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


def _raise(error: OSError) -> None:
    raise error


def _hidden(name: str) -> bool:
    """Left out of a skill read from a folder: dot files and Python's bytecode caches."""
    return name.startswith(".") or name == "__pycache__"


def _refuse(message: str) -> Invalid:
    return Invalid(INVALID_FOLDER, [field_error("path", message)])


def _files(count: int) -> str:
    return f"{count} file{'' if count == 1 else 's'}"


def _detail(detail: Any) -> str:
    if isinstance(detail, dict) and "message" in detail:
        field = detail.get("field")
        return f"{field}: {detail['message']}" if field else str(detail["message"])
    return str(detail)


def _report(line: str, error: DomainError) -> None:
    print(line, file=sys.stderr)
    for detail in error.details:
        print(f"  {_detail(detail)}", file=sys.stderr)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def _console() -> Any:
    from rich.console import Console

    # Lines are never wrapped (a test or a log reads them whole), numbers never coloured.
    return Console(stderr=True, soft_wrap=True, highlight=False)
