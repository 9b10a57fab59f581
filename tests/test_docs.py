"""The README and the files in docs/ against the code they describe: every link and anchor
between them resolves, every `make` target exists, every `agent-platform` command line parses,
the endpoint table is the OpenAPI document's operations, the configuration table is what
`entrypoints/config.py` reads, and every repository path and module they name exists.

No server and no database: the OpenAPI document comes from the Litestar app object, built
with a `Database` that names an address nothing listens on. Building the app opens nothing
(the dishka container resolves its pool, verifier and listeners on start-up, which never
runs here), so the document is the one `GET /schema/openapi.json` serves."""

from __future__ import annotations

import contextlib
import io
import mimetypes
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS_DIR = ROOT / "docs"
DOCS = [ROOT / "README.md", *sorted(DOCS_DIR.glob("*.md"))]
API = DOCS_DIR / "api.md"
CONFIGURATION = DOCS_DIR / "configuration.md"
# Written by another hand in the same change as these files; linked to from them.
ARCHITECTURE = DOCS_DIR / "ARCHITECTURE.md"

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
CODE_SPAN = re.compile(r"`([^`]+)`")
LINK = re.compile(r"(?<!!)\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
ENDPOINT = re.compile(rf"^({'|'.join(METHODS)}) (/\S*)$")


def name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@dataclass(frozen=True)
class Page:
    """One Markdown file: its prose (code blocks blanked, so line numbers stay) and its code
    blocks."""

    path: Path
    prose: str
    code: tuple[str, ...]

    @property
    def spans(self) -> list[str]:
        """Its inline code spans (they may wrap onto the next line)."""
        return CODE_SPAN.findall(self.prose)


@cache
def page(path: Path) -> Page:
    prose: list[str] = []
    code: list[str] = []
    block: list[str] | None = None
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            if block is None:
                block = []
            else:
                code.append("\n".join(block))
                block = None
            prose.append("")
        elif block is not None:
            block.append(line)
            prose.append("")
        else:
            prose.append(line)
    assert block is None, f"{name(path)}: a code block is not closed"
    return Page(path, "\n".join(prose), tuple(code))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lower-cased, punctuation dropped, spaces to
    hyphens (markup goes with the punctuation; a link keeps its text)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(path: Path) -> frozenset[str]:
    """Every heading's anchor, a repeated one with `-1`, `-2`, ... as GitHub numbers them."""
    seen: dict[str, int] = {}
    found = set()
    for line in page(path).prose.splitlines():
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def test_the_docs_are_there():
    assert {name(p) for p in DOCS} >= {
        "README.md",
        "docs/README.md",
        "docs/api.md",
        "docs/configuration.md",
        "docs/operations.md",
        "docs/deployment.md",
        "docs/development.md",
    }


def test_the_readme_stays_short():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


def test_the_table_of_contents_names_every_docs_file_and_section():
    toc = page(DOCS_DIR / "README.md").prose
    for path in DOCS[1:]:
        if path.name == "README.md":
            continue
        assert f"]({path.name})" in toc or f"]({path.name}#" in toc, path.name
        if path == ARCHITECTURE:
            continue  # its own author keeps its sections
        for anchor in anchors(path):
            if f"]({path.name}#{anchor})" not in toc and anchor != slug(title(path)):
                pytest.fail(f"docs/README.md does not list {path.name}#{anchor}")


def title(path: Path) -> str:
    first = page(path).prose.lstrip().splitlines()[0]
    assert first.startswith("# "), f"{name(path)} starts with its title"
    return first[2:]


@pytest.mark.parametrize("path", DOCS, ids=name)
def test_links_and_anchors_resolve(path: Path):
    problems = []
    for _text, target in LINK.findall(CODE_SPAN.sub("", page(path).prose)):
        if re.match(r"^[a-z][a-z+.-]*:", target):
            continue  # http(s):, mailto: and the like leave the repository
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if ROOT not in (linked, *linked.parents):
            problems.append(f"{target}: outside the repository")
        elif linked == ARCHITECTURE and not linked.exists():
            continue  # see test_the_architecture_file_is_written
        elif not linked.exists():
            problems.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            problems.append(f"{target}: no heading #{anchor} in {name(linked)}")
    assert not problems, f"{name(path)}:\n  " + "\n  ".join(problems)


def test_the_architecture_file_is_written():
    linked = any(
        "ARCHITECTURE.md" in target for p in DOCS for _t, target in LINK.findall(page(p).prose)
    )
    if linked and not ARCHITECTURE.exists():
        pytest.skip("docs/ARCHITECTURE.md is linked to but not written yet (its author's part)")


# ---- make targets

MAKE = re.compile(r"(?:^|[\s;&|(])make\s+([A-Za-z][\w.-]*)", re.M)


def makefile_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w.-]*)\s*:(?!=)", text, re.M))
    for phony in re.findall(r"^\.PHONY:(.*)$", text, re.M):
        targets |= set(phony.split())
    return targets


def code_texts(path: Path) -> list[str]:
    """What a reader may type: the inline code spans and the code blocks."""
    return [*page(path).spans, *page(path).code]


@pytest.mark.parametrize("path", DOCS, ids=name)
def test_every_make_target_shown_exists(path: Path):
    targets = makefile_targets()
    assert {"serve", "test"} <= targets
    shown = {target for text in code_texts(path) for target in MAKE.findall(text)}
    assert shown <= targets, f"{name(path)} shows make targets the Makefile lacks"


def test_the_docs_show_make_targets():
    shown = {target for path in DOCS for text in code_texts(path) for target in MAKE.findall(text)}
    assert {"serve", "test", "bench", "fuzz", "constraints"} <= shown


# ---- agent-platform command lines

# Shell variables the examples set (the README's curl session), by a value of their kind; any
# other `$NAME` becomes "1".
SAMPLES = {"KB": "1", "AGENT": "1", "SIZE": "34", "THREAD": "525e5d11-0000-4000-8000-000000000000"}
# Skipped, as no value fills them: `<placeholder>`, `…` and `...` (an elided argument). Only
# code blocks are read: an inline `agent-platform token` names a command, it is no line to run.
UNFILLABLE = re.compile(r"<[^>]*>|…|\.\.\.")
SEPARATORS = set("();<>|&")


def variants(words: list[str]) -> list[list[str]]:
    """A usage line with each optional group (`[--json]`, `[--concurrency N]`) left out and
    put in."""
    start = next((i for i, w in enumerate(words) if w.startswith("[-")), None)
    if start is None:
        return [words]
    end = next(j for j in range(start, len(words)) if words[j].endswith("]"))
    group = [*words[start : end + 1]]
    group[0] = group[0][1:]
    group[-1] = group[-1][:-1]
    before, after = words[:start], words[end + 1 :]
    return [*variants(before + after), *variants(before + group + after)]


def tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    return list(lexer)


def commands_in(text: str) -> list[list[str]]:
    """The arguments of each `agent-platform` command in a code block: a command that stands
    where a shell runs one (a line's start after a prompt and `NAME=value` assignments, or
    after `$(`, `|`, `;`, `&&`), under any path (`.venv/bin/`), to the end of that command."""
    found = []
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        line = re.sub(r"^\s*\$\s+", "", raw)  # a shell prompt
        line = re.sub(r"\$\{?([A-Z_][A-Z0-9_]*)\}?", lambda m: SAMPLES.get(m.group(1), "1"), line)
        if "agent-platform" not in line:
            continue
        try:
            words = tokens(line)
        except ValueError:
            pytest.fail(f"cannot split the shell line {raw!r}")
        start = 0
        for i, word in enumerate(words):
            if set(word) <= SEPARATORS:
                start = i + 1
            elif word.split("/")[-1] == "agent-platform" and all(
                re.match(r"^[A-Za-z_]\w*=", w) for w in words[start:i]
            ):
                end = next(
                    (j for j in range(i + 1, len(words)) if set(words[j]) <= SEPARATORS),
                    len(words),
                )
                found.append(words[i + 1 : end])
    return found


def parse(args: list[str]) -> str | None:
    """None when the CLI's own parser takes the arguments, else what it said."""
    from entrypoints.cli import _parser

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            _parser().parse_args(args)
    except SystemExit as stop:
        if stop.code not in (0, None):  # 0: `--help` printed the usage
            return (err.getvalue().strip().splitlines() or ["exit " + str(stop.code)])[-1]
    return None


def all_commands() -> list[tuple[str, str]]:
    return [
        (name(path), shlex.join(args))
        for path in DOCS
        for block in page(path).code
        for words in commands_in(block)
        for args in variants(words)
    ]


def test_the_docs_show_commands():
    shown = {command.split()[0] for _path, command in all_commands() if command}
    assert {"serve", "token", "kb", "skills", "tasks", "migrate", "worker"} <= shown


@pytest.mark.parametrize(
    "command", sorted(set(all_commands())), ids=lambda c: f"{c[0]}: {c[1]}"[:80]
)
def test_every_command_line_parses(command: tuple[str, str]):
    path, line = command
    if UNFILLABLE.search(line):
        pytest.skip("a placeholder no sample value fills")
    problem = parse(shlex.split(line))
    assert problem is None, f"{path}: `agent-platform {line}`: {problem}"


def test_a_wrong_command_line_would_be_caught():
    assert parse(["kb", "create", "--org", "org_demo"]) is not None  # --name is required
    assert parse(["kb", "create", "--org", "org_demo", "--name", "Handbook"]) is None
    assert commands_in("docker build -t agent-platform .") == []
    assert commands_in("export T=$(.venv/bin/agent-platform token --org o --user $KB)") == [
        ["token", "--org", "o", "--user", "1"]
    ]
    assert variants(["worker", "[--concurrency", "N]"]) == [
        ["worker"],
        ["worker", "--concurrency", "N"],
    ]


# ---- what the examples write and which ids they use

# A file a shell line writes: `tee F`, `> F`, `curl -o F` or `-D F`.
WRITES = re.compile(r"(?:\btee|\s-[oD]|\s>|^>)\s*(\"[^\"]+\"|[^\s|;)&]+)")


def written(block: str) -> list[str]:
    return [
        target.strip('"')
        for line in block.splitlines()
        if not line.lstrip().startswith("#")
        for target in WRITES.findall(line)
    ]


@pytest.mark.parametrize("path", DOCS, ids=name)
def test_the_examples_write_their_files_in_a_temporary_folder(path: Path):
    """The README's session runs in the repository's folder: what it writes goes to `$TMP`
    (`mktemp -d`), never among the repository's files."""
    stray = [f for block in page(path).code for f in written(block) if not f.startswith("$TMP/")]
    assert not stray, f"{name(path)} writes into the current folder: {stray}"


def test_the_cli_example_adds_the_file_to_the_knowledge_base_it_created():
    """The README's `kb create` then `kb add-file --kb $KB`: $KB must be the id the CLI just
    printed, not the one the curl session left in the shell."""
    blocks = [b for b in page(ROOT / "README.md").code if "kb create" in b and "add-file" in b]
    assert blocks
    for block in blocks:
        kb = re.search(r"add-file .*--kb \$(\w+)", block)
        assert kb and re.search(rf"^{kb.group(1)}=\$\(.*kb create .*\)$", block, re.M), block


def test_the_write_checks_would_catch_a_stray_file():
    assert written("curl -s $API | tee kb.json") == ["kb.json"]
    assert written('printf x > "$TMP/a.md"\ncurl -D headers.txt -o "$TMP/b"') == [
        "$TMP/a.md",
        "headers.txt",
        "$TMP/b",
    ]
    assert written("# a comment > not a file\ncmd 2>&1 | grep x") == []


# ---- endpoints against the OpenAPI document

# The signed download address is left out of the document on purpose (`include_in_schema=False`
# in entrypoints/http/controllers/uploads.py): the service hands it out in a 302 from
# `GET /kb/files/download`; a client never calls it by itself. It is checked against the app's
# routes instead.
# The console's development sign-in is left out too (entrypoints/http/controllers/console.py): it
# is the console's page, not part of the API a client is generated for.
NOT_IN_THE_DOCUMENT = {("GET", "/storage/{}"), ("POST", "/console/sign-in")}


def template(path: str) -> str:
    """`/chat/{threadId}/stream`, `/chat/{thread_id:str}/stream` -> `/chat/{}/stream`."""
    return re.sub(r"\{[^}]*\}", "{}", path)


@cache
def app() -> Any:
    from entrypoints.config import Settings
    from entrypoints.database import Database
    from entrypoints.http.app import create_litestar

    # Local storage, the default: its upload and download routes are part of the app.
    settings = Settings.from_env({})
    return create_litestar(settings, Database("postgresql://nobody@127.0.0.1:9/none"))


def documented_operations() -> set[tuple[str, str]]:
    document = app().openapi_schema.to_schema()
    return {
        (method.upper(), template(path))
        for path, item in document["paths"].items()
        for method in item
        if method.upper() in METHODS
    }


def routed_operations() -> set[tuple[str, str]]:
    return {
        (method, template(route.path))
        for route in app().routes
        for method in getattr(route, "methods", ())
        if method in METHODS
    }


def endpoint_table() -> set[tuple[str, str]]:
    """The operations the first column of api.md's `| Method and path |` table names, their
    query strings and optional parts (`?kbId=`, `[?taskId=]`) left out."""
    lines = page(API).prose.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Method and path |"))
    named = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cell = re.split(r"(?<!\\)\|", line)[1]
        for span in CODE_SPAN.findall(cell):
            match = ENDPOINT.match(span)
            assert match, f"not a method and path: {span!r}"
            method, path = match.groups()
            named.add((method, template(re.split(r"[?\[]", path)[0])))
    return named


def test_every_endpoint_of_the_table_is_an_operation_of_the_document():
    named = endpoint_table()
    assert len(named) > 50
    missing = named - documented_operations()
    assert missing == NOT_IN_THE_DOCUMENT, f"not in the OpenAPI document: {sorted(missing)}"
    assert missing <= routed_operations()


def test_every_operation_of_the_document_is_in_the_table():
    missing = documented_operations() - endpoint_table()
    assert not missing, f"docs/api.md's endpoint table lacks {sorted(missing)}"


# ---- the configuration table against what config.py reads

AP_NAME = re.compile(r"\bAP_[A-Z0-9_]+\b")


def configuration_table() -> set[str]:
    lines = page(CONFIGURATION).prose.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Variable |"))
    named = set()
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        named |= set(AP_NAME.findall(line.split("|")[1]))
    return named


def settings_read() -> set[str]:
    """Every `AP_*` name the service's configuration reads (`config.py` and the search's and the
    tool servers' own settings modules)."""
    read: set[str] = set()
    for module in ("config.py", "search_config.py", "tools_config.py"):
        text = (ROOT / "src/entrypoints" / module).read_text()
        read |= set(re.findall(r'"(AP_[A-Z0-9_]+)"', text))
    return read


def test_the_configuration_table_is_what_config_py_reads():
    read = settings_read()
    table = configuration_table()
    assert len(read) > 40
    assert not table - read, f"the table names settings config.py does not read: {table - read}"
    assert not read - table, f"config.py reads settings the table lacks: {read - table}"


def test_every_ap_setting_the_docs_name_is_one_the_service_reads():
    read = settings_read()
    # Read by the llama.cpp install script and by the fuzzing test, not by the service.
    others = set(AP_NAME.findall((ROOT / "scripts/install-llama-cpp.sh").read_text()))
    others |= set(AP_NAME.findall((ROOT / "tests/http/test_fuzz_openapi.py").read_text()))
    # Read by the browser tests, the Makefile and the console's development server.
    others |= set(AP_NAME.findall((ROOT / "tests/browser/support.py").read_text()))
    others |= set(AP_NAME.findall((ROOT / "Makefile").read_text()))
    others |= set(AP_NAME.findall((ROOT / "console/vite.config.ts").read_text()))
    for path in DOCS:
        named = set(AP_NAME.findall(path.read_text()))
        # `AP_S3_*` names every setting with that prefix.
        unknown = {
            n
            for n in named - read - others
            if not (n.endswith("_") and any(r.startswith(n) for r in read))
        }
        assert not unknown, f"{name(path)} names settings nothing reads: {unknown}"


# ---- repository paths and module names

# Top-level folders a path in the docs may start with, and the packages under src/ (a path
# such as `application/metering.py` is read below src/).
FOLDERS = {"src", "tests", "bench", "migrations", "scripts", "docs", "examples", ".ci"}
PACKAGES = {p.name for p in (ROOT / "src").iterdir() if (p / "__init__.py").exists()}
FILE = re.compile(r"^[\w.-]+\.(py|sh|toml|ya?ml|txt|lock)$|^(Dockerfile|Makefile)$")
# Files the docs tell the reader to create (`alembic revision` writes it).
CREATED_BY_THE_READER = {"migrations/versions/0018_what_it_does.py"}
MODULE = re.compile(rf"^(?:{'|'.join(sorted(PACKAGES))})(?:\.[A-Za-z_]\w*)+")


def paths_named(path: Path) -> set[str]:
    """The words of inline code spans that look like repository paths."""
    named = set()
    for span in page(path).spans:
        for raw in span.split():
            word = raw.strip("(),;:")
            if not re.fullmatch(r"[\w.-]+(/[\w.-]*)*", word) or word.startswith("./"):
                continue
            first = word.split("/")[0]
            if "/" in word and mimetypes.guess_extension(word) is not None:
                continue  # a media type such as application/json
            if ("/" in word and (first in FOLDERS or first in PACKAGES)) or FILE.match(word):
                named.add(word)
    return named


def exists(word: str) -> bool:
    first = word.split("/", maxsplit=1)[0]
    places = [ROOT / word]
    if first in PACKAGES:
        places.append(ROOT / "src" / word)
    if "/" not in word:
        places.append(ROOT / "migrations" / "versions" / word)
    return any(place.exists() for place in places)


@pytest.mark.parametrize("path", DOCS, ids=name)
def test_every_repository_path_named_exists(path: Path):
    missing = sorted(w for w in paths_named(path) - CREATED_BY_THE_READER if not exists(w))
    assert not missing, f"{name(path)} names paths that do not exist: {missing}"


def defines(module: Path, attribute: str) -> bool:
    pattern = rf"^(?:async\s+)?(?:def|class)\s+{attribute}\b|^{attribute}\s*[:=]"
    return re.search(pattern, module.read_text(), re.M) is not None


def module_exists(dotted: str) -> bool:
    """`adapters.extraction.sandbox` is a module under src/; `entrypoints.http.app.create_app`
    is a name that module defines."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        base = ROOT / "src" / Path(*parts[:cut])
        module = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if module.exists():
            rest = parts[cut:]
            return not rest or (len(rest) == 1 and defines(module, rest[0]))
    return False


@pytest.mark.parametrize("path", DOCS, ids=name)
def test_every_module_named_exists(path: Path):
    named = {
        match.group(0)
        for text in code_texts(path)
        for word in text.split()
        if (match := MODULE.match(word.strip("(`")))
    }
    missing = sorted(m for m in named if not module_exists(m))
    assert not missing, f"{name(path)} names modules that do not exist under src/: {missing}"


def test_the_path_checks_would_catch_a_stale_name():
    assert not module_exists("adapters.llm.runner")  # renamed to adapters.local_model.runner
    assert module_exists("adapters.local_model.runner")
    assert module_exists("entrypoints.worker.jobs.build_worker")
    assert not exists("src/adapters/postgres/repositories.py")
    assert "application/json" not in paths_named(API)
