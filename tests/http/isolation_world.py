"""Two organizations with one of every kind of resource, for the isolation matrix
(tests/http/test_isolation_matrix.py): what each holds, how to build it and how to read it back.

It also reads the OpenAPI document: each operation's id-like places and minimal valid bodies.

Organization B's names and contents carry MARK, and its integer ids come from a range of their
own (every sequence is moved before B is built and moved back after), so that any of B's
identifiers or text in a response to A can be found in the raw text."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from application.ports.chat_model import Finished, ToolCall, ToolCallRequested
from tests.fakes.chat import ScriptedChatModel
from tests.http.chat_support import Holder, settled, start_polled, user_message
from tests.http.helpers import association, put_upload

MARK = "bmarkzq"  # in every name and text of organization B, never in A's
B_IDS_FROM = 7_000_000_000_000  # B's integer ids: one range of 10^10 per sequence from here


@dataclass
class Org:
    """One organization's admin and resources. `ids[kind]` holds its identifiers of each kind
    (the first of each is what the matrix substitutes)."""

    org: str
    admin: str
    headers: dict[str, str]
    member: str
    ids: dict[str, list[Any]] = field(default_factory=dict)

    def first(self, kind: str) -> Any:
        return self.ids[kind][0]


def skill_md(name: str, description: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nRun it.\n"


async def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, (response.request.url, response.text)
    return response.json() if response.content else None


async def build_org(
    client: AsyncTestClient,
    idp: Any,
    worker: Callable[[], Any],
    org: str,
    mark: str,
    holder: Holder | None = None,
) -> Org:
    """Every kind of resource the API knows, created through the API as `org`'s admin."""
    admin, member = f"user_{mark}admin", f"user_{mark}member"
    token = idp.issue(user_id=admin, org_id=org, role="admin", email=f"{mark}-admin@x.test")
    o = Org(org, admin, {"Authorization": f"Bearer {token}"}, member)
    h = o.headers
    for user in (member, f"user_{mark}gone"):
        joined = idp.issue(user_id=user, org_id=org, role="member", email=f"{user}@x.test")
        await ok(await client.get("/kb/manage", headers={"Authorization": f"Bearer {joined}"}))
    gone_user = {"userIds": [f"user_{mark}gone"]}
    await ok(await client.request("DELETE", "/admin/users", json=gone_user, headers=h))
    await ok(
        await client.post(
            "/admin/updateUserMetadata",
            json={"userId": member, "metadata": {"note": f"{mark} private note"}},
            headers=h,
        )
    )
    kb = (
        await ok(
            await client.post(
                "/kb/manage",
                json={"name": f"{mark} handbook", "description": f"{mark} kb"},
                headers=h,
            ),
            201,
        )
    )["knowledgeBase"]
    data = f"# {mark} vault\n\nThe vault code of {mark} is 4242.\n".encode()
    presigned = await ok(
        await client.post(
            "/upload/presigned",
            json={"fileName": "notes.md", "contentType": "text/markdown", "fileSize": len(data)},
            headers=h,
        )
    )
    await ok(await put_upload(client, presigned, data))
    body = association(kb["id"], presigned, fileSize=len(data))
    file = (await ok(await client.post("/kb/files", json=body, headers=h), 201))["file"]
    tag = (
        await ok(await client.post("/agents/tags", json={"name": f"{mark} tag"}, headers=h), 201)
    )["tag"]
    skill = (
        await ok(
            await client.post(
                "/skills/manage",
                json={"skillMd": skill_md(f"{mark}-skill", f"{mark} skill")},
                headers=h,
            ),
            201,
        )
    )["skill"]
    content = base64.b64encode(f"{mark} reference".encode()).decode()
    skill_path = f"references/{mark}.md"
    await ok(
        await client.post(
            "/skills/files",
            json={"skillId": skill["id"], "path": skill_path, "content": content},
            headers=h,
        ),
        201,
    )
    gone = (
        await ok(
            await client.post(
                "/skills/manage",
                json={"skillMd": skill_md(f"{mark}-gone", f"{mark} deleted")},
                headers=h,
            ),
            201,
        )
    )["skill"]
    await ok(await client.delete("/skills/manage", params={"skillId": gone["id"]}, headers=h))
    tool_server = (
        await ok(
            await client.post(
                "/tools",
                json={
                    "name": f"{mark}-tools",
                    "kind": "mcp",
                    "url": f"http://127.0.0.1:9/{mark}",
                    "description": f"{mark} tools",
                    "headers": {"Authorization": f"Bearer {mark}-secret"},
                    "requireApproval": "always",
                },
                headers=h,
            ),
            201,
        )
    )["toolServer"]
    agent = (
        await ok(
            await client.post(
                "/agents",
                json={
                    "name": f"{mark} agent",
                    "role": f"{mark} role",
                    "model": "openai:scripted",
                    "knowledgeBaseIds": [kb["id"]],
                    "skillIds": [skill["id"]],
                    "tagIds": [tag["id"]],
                },
                headers=h,
            ),
            201,
        )
    )["agent"]
    sent = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message(f"{mark} question")},
        headers={**h, "X-Stream-Response": "false"},
    )
    thread = str((await ok(sent, 202))["threadId"])
    await settled(client, o, thread)
    thread2 = await start_polled(client, o, agent)
    await settled(client, o, thread2)
    task = (
        await ok(
            await client.post(
                "/scheduled-tasks",
                json={
                    "agentId": agent["id"],
                    "name": f"{mark} task",
                    "prompt": f"{mark} prompt",
                    "cron": "0 8 * * 1-5",
                },
                headers=h,
            ),
            201,
        )
    )["task"]
    runs = []
    for _ in range(2):  # the second is recorded `skipped`: the first is still queued
        run_now = await client.post("/scheduled-tasks/run", json={"taskId": task["id"]}, headers=h)
        runs.append((await ok(run_now, 202))["run"])
    invitation = (
        await ok(
            await client.post(
                "/admin/invitations",
                json={"email": f"{mark}-invitee@x.test", "role": "org:member"},
                headers=h,
            ),
            201,
        )
    )["invitation"]
    settings_body = {
        "defaultAgentId": agent["id"],
        "spendCaps": {"daily": 100},
        "sidebarLinks": [{"label": f"{mark} link", "url": f"https://{mark}.example/"}],
        "feedbackModal": {"customHtml": f"<p>{mark} feedback</p>"},
    }
    await ok(await client.put("/orgSettings", json={"settings": settings_body}, headers=h))
    async with worker():
        await until(client, h, kb["id"], task["id"])
    renamed = {"threadId": thread, "name": f"{mark} title"}
    await ok(await client.patch("/api/renameConversation", json=renamed, headers=h))
    run_thread = next(
        r["threadId"] for r in await list_runs(client, h, task["id"]) if r["threadId"]
    )
    paused, approval = await paused_answer(client, o, holder or Holder(), tool_server)
    o.ids = {
        "kb": [kb["id"]],
        "file": [file["fileId"]],
        "filekey": [file["fileKey"]],
        "contentkey": [file["contentKey"]],
        "agent": [agent["id"]],
        "tag": [tag["id"]],
        "skill": [skill["id"], gone["id"]],
        "skillpath": [skill_path],
        "thread": [thread, thread2, run_thread, paused],
        "approval": [approval],
        "task": [task["id"]],
        "toolserver": [tool_server["id"]],
        "run": [r["id"] for r in runs],
        "user": [member, admin, f"user_{mark}gone"],
        "invitation": [invitation["id"]],
        "cursor": await cursors(client, h, task["id"]),
    }
    return o


async def paused_answer(
    client: AsyncTestClient, o: Org, holder: Holder, tool_server: dict[str, Any]
) -> tuple[str, str]:
    """A conversation whose answer waits for approval of a call of the server's first tool (an
    agent of its own; the model scripted to call it): the thread and the approval's id."""
    grant = [{"toolServerId": tool_server["id"], "names": None}]
    body = {"name": "Caller", "model": "openai:scripted", "tools": grant}
    agent = (await ok(await client.post("/agents", json=body, headers=o.headers), 201))["agent"]
    name = f"{tool_server['name']}__{tool_server['tools'][0]['name']}"
    call = ToolCallRequested(ToolCall(id="c1", name=name, arguments={}))
    holder.model = ScriptedChatModel([call, Finished("tool_calls")], supports_tools=True)
    sent = await client.post(
        "/chat",
        json={"agentId": agent["id"], "messages": user_message("call it")},
        headers={**o.headers, "X-Stream-Response": "false"},
    )
    thread = str((await ok(sent, 202))["threadId"])
    stored = await settled(client, o, thread)
    holder.model = ScriptedChatModel()
    assert stored["streamStatus"] == "awaiting_approval", stored
    parts = stored["messages"][-1]["parts"]
    return thread, next(p["approvalId"] for p in parts if p["type"] == "tool-approval-request")


async def list_runs(client: AsyncTestClient, headers: dict[str, str], task_id: int) -> list[Any]:
    response = await client.get(
        "/scheduled-tasks/runs", params={"taskId": task_id}, headers=headers
    )
    return list((await ok(response))["runs"])


async def until(client: AsyncTestClient, headers: dict[str, str], kb_id: int, task_id: int) -> None:
    """Until the file is processed and the task's runs have ended."""
    for _ in range(600):
        files = (await ok(await client.get("/kb/files", params={"kbId": kb_id}, headers=headers)))[
            "files"
        ]
        runs = await list_runs(client, headers, task_id)
        ended = all(r["status"] in ("succeeded", "failed", "skipped") for r in runs)
        if (
            files[0]["processingStatus"] == "completed"
            and ended
            and any(r["threadId"] for r in runs)
        ):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"never processed: {files} {runs}")


async def cursors(client: AsyncTestClient, headers: dict[str, str], task_id: int) -> list[str]:
    """A `nextCursor` from each paged list (audit log, runs, conversations)."""
    found = []
    for path, params in (
        ("/admin/audit-log", {"limit": 1}),
        ("/scheduled-tasks/runs", {"taskId": task_id, "limit": 1}),
        ("/conversations", {"limit": 1}),
    ):
        page = await ok(await client.get(path, params=params, headers=headers))
        assert page["nextCursor"], (path, page)
        found.append(page["nextCursor"])
    return found


async def move_sequences(owner: AsyncEngine, base: int | None) -> None:
    """Every sequence of the public schema to its own range from `base` (B's), or, with None,
    to a low range again (above every id in use outside B's ranges)."""
    async with owner.begin() as connection:
        names = (
            await connection.scalars(
                text(
                    "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' "
                    "ORDER BY sequencename"
                )
            )
        ).all()
        for i, name in enumerate(names):
            value = base + i * 10_000_000_000 if base is not None else 1_000_000 + i * 10_000
            await connection.execute(text("SELECT setval(:s, :v)"), {"s": name, "v": value})


async def rls_tables(owner: AsyncEngine) -> dict[str, bool]:
    """Every table of the public schema, and whether it has row-level security enabled and
    forced."""
    async with owner.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') ORDER BY c.relname"
            )
        )
        return {name: bool(secured) for name, secured in rows}


async def db_snapshot(owner: AsyncEngine, org: str) -> dict[str, str]:
    """A digest of `org`'s rows in every table with row-level security, read as the owner."""
    digests = {}
    async with owner.connect() as connection:
        for table, secured in (await rls_tables(owner)).items():
            if not secured:
                continue
            rows = (
                await connection.scalars(
                    text(f"SELECT row_to_json(t)::text FROM {table} t WHERE t.org_id = :org"),
                    {"org": org},
                )
            ).all()
            digests[table] = (
                f"{len(rows)}:" + hashlib.sha256("\n".join(sorted(rows)).encode()).hexdigest()
            )
    return digests


async def db_tokens(owner: AsyncEngine, org: str) -> set[str]:
    """`org`'s row ids (every `id` column and every uuid column) in every table with row-level
    security, as text."""
    tokens: set[str] = set()
    async with owner.connect() as connection:
        columns = (
            await connection.execute(
                text(
                    "SELECT c.relname, a.attname FROM pg_attribute a "
                    "JOIN pg_class c ON c.oid = a.attrelid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = 'public' AND c.relrowsecurity AND a.attnum > 0 "
                    "AND NOT a.attisdropped AND (a.attname = 'id' OR a.atttypid = 'uuid'::regtype)"
                )
            )
        ).all()
        for table, column in columns:
            values = await connection.scalars(
                text(f'SELECT "{column}"::text FROM {table} WHERE org_id = :org'), {"org": org}
            )
            tokens.update(v for v in values if v is not None)
    return tokens


async def api_snapshot(client: AsyncTestClient, o: Org) -> dict[str, Any]:
    """What `o`'s admin reads of its own resources (status and body of each read), without the
    volatile sign-in times."""
    h = o.headers
    reads: dict[str, Any] = {}
    for path, params in (
        ("/kb/manage", {}),
        ("/kb/files", {"kbId": o.first("kb")}),
        ("/agents", {}),
        ("/agents/tags", {}),
        ("/skills/manage", {}),
        ("/skills/manage", {"skillId": o.first("skill")}),
        ("/conversations", {}),
        ("/scheduled-tasks", {}),
        ("/tools", {}),
        ("/tools", {"toolServerId": o.first("toolserver")}),
        ("/scheduled-tasks/runs", {"taskId": o.first("task")}),
        ("/admin/invitations", {}),
        ("/admin/getUsersInOrg", {}),
        ("/orgSettings", {}),
        ("/admin/audit-log", {}),
        *(("/getConversation", {"threadId": t}) for t in o.ids["thread"]),
    ):
        response = await client.get(path, params=params, headers=h)
        body = response.json()
        if path == "/admin/getUsersInOrg" and response.status_code == 200:
            body = sorted(({**m, "lastSignInAt": None} for m in body), key=lambda m: m["id"])
        reads[f"GET {path} {sorted(params.items())}"] = (response.status_code, body)
    file = await client.get(
        "/skills/files", params={"skillId": o.first("skill"), "path": o.first("skillpath")},
        headers=h,
    )  # fmt: skip
    reads["skill file"] = (file.status_code, file.content)
    found = await client.post(
        "/kb/search", json={"kbId": o.first("kb"), "query": "vault code"}, headers=h
    )
    reads["search"] = (found.status_code, found.json())
    return reads


# Reading the OpenAPI document: each operation's id-like places, and minimal valid bodies.

METHODS = ("get", "put", "post", "patch", "delete")
# Which kind of identifier each id-like field or parameter holds.
KINDS = {
    "kbId": "kb", "kbIds": "kb", "knowledgeBaseIds": "kb", "fileId": "file",
    "fileKey": "filekey", "contentKey": "contentkey", "agentId": "agent",
    "defaultAgentId": "agent", "tagId": "tag", "tagIds": "tag", "skillId": "skill",
    "skillIds": "skill", "threadId": "thread", "thread_id": "thread", "taskId": "task",
    "userId": "user", "userIds": "user", "invitationIds": "invitation", "cursor": "cursor",
    "toolServerId": "toolserver", "approvalId": "approval",
}  # fmt: skip
# Names that look like identifiers but name nothing the service keeps for an organization.
NOT_IDS = {
    "upstreamConversationId": "an opaque id of a conversation elsewhere, stored as given",
    "sidebarPinnedAppIds": "the console's app ids, kept as a list of numbers in org settings",
    "expectedVersion": "a version number, not an identifier",
}


# A valid value for each required field that names nothing (`fileName` is the world's files' name,
# so that a file's own key passes the key check and the check of the other field is reached).
SAMPLES: dict[str, Any] = {
    "name": "probe", "prompt": "probe prompt", "cron": "@daily", "email": "probe@a.test",
    "query": "vault code", "skillMd": skill_md("probe-skill", "probe"),
    "content": base64.b64encode(b"probe").decode(), "path": "notes/probe.md",
    "fileName": "notes.md", "contentType": "text/markdown", "fileSize": 5,
    "messages": user_message("probe"), "metadata": {"probe": 1},
    "url": "http://127.0.0.1:9/probe",
}  # fmt: skip


def probe_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("SKILL.md", skill_md("probe-import", "probe"))
    return buffer.getvalue()


@dataclass(frozen=True)
class Slot:
    """One id-like place of an operation: a path or query parameter, or a (nested) body field."""

    where: str
    keys: tuple[str, ...]
    kind: str
    required: bool
    array: bool

    @property
    def name(self) -> str:
        return self.keys[-1]


@dataclass
class Operation:
    method: str
    path: str
    spec: dict[str, Any]
    slots: list[Slot] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.method} {self.path}"


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def is_array(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "array" or any(
        o.get("type") == "array" for o in schema.get("oneOf", [])
    )


def id_like(name: str) -> bool:
    return name in ("id", "key", "cursor") or name.endswith(("Id", "Ids", "_id", "Key"))


def json_schema(doc: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any] | None:
    content = spec.get("requestBody", {}).get("content", {})
    schema = content.get("application/json", {}).get("schema")
    return None if schema is None else resolve(doc, schema)


def operations(doc: dict[str, Any]) -> list[Operation]:
    """Every operation of the document with its id-like slots."""
    found = []
    for path, item in doc["paths"].items():
        for method in (m for m in METHODS if m in item):
            op = Operation(method.upper(), path, item[method])
            for param in op.spec.get("parameters", []):
                name, where = param["name"], param["in"]
                kind = KINDS.get(name) or (
                    "skillpath" if (where, name) == ("query", "path") else ""
                )
                if kind:
                    slot = Slot(where, (name,), kind, param.get("required", False), False)
                    op.slots.append(slot)
                elif id_like(name) and name not in NOT_IDS and where != "header":
                    op.unknown.append(name)
            schema = json_schema(doc, op.spec)
            if schema is not None:
                walk(doc, op, schema, (), True)
            found.append(op)
    return found


def walk(doc: dict[str, Any], op: Operation, schema: dict[str, Any], at: tuple, req: bool) -> None:
    required = set(schema.get("required", []))
    for name, declared in schema.get("properties", {}).items():
        sub = resolve(doc, declared)
        if name in KINDS:
            op.slots.append(
                Slot("body", (*at, name), KINDS[name], req and name in required, is_array(sub))
            )
        elif id_like(name) and name not in NOT_IDS:
            op.unknown.append(".".join((*at, name)))
        elif "properties" in sub:
            walk(doc, op, sub, (*at, name), req and name in required)


def sample(doc: dict[str, Any], name: str, schema: dict[str, Any]) -> Any:
    if name in SAMPLES:
        return SAMPLES[name]
    if "enum" in schema:
        return schema["enum"][0]
    if "properties" in schema:
        return {
            k: sample(doc, k, resolve(doc, v))
            for k, v in schema["properties"].items()
            if k in schema.get("required", [])
        }
    return {"integer": 1, "boolean": True, "array": [], "object": {}}.get(
        schema.get("type", ""), "probe"
    )


def body(doc: dict[str, Any], schema: dict[str, Any], values: dict[tuple, Any], at=()) -> dict:
    """A minimal valid body: required fields from SAMPLES, `values` at their places."""
    out: dict[str, Any] = {}
    for name, declared in schema.get("properties", {}).items():
        sub, keys = resolve(doc, declared), (*at, name)
        if keys in values:
            out[name] = values[keys]
        elif "properties" in sub and any(k[: len(keys)] == keys for k in values):
            out[name] = body(doc, sub, values, keys)
        elif name in schema.get("required", []):
            out[name] = (
                body(doc, sub, values, keys) if "properties" in sub else sample(doc, name, sub)
            )
    return out
