"""The isolation matrix: every operation of the service's own OpenAPI document, called as
organization A's admin with organization B's identifiers in every id-like parameter and body
field, is refused exactly as it refuses identifiers that never existed, and nothing of B comes
back or changes; then the same from Postgres as the application role, table by table.

Organization B's world is built once for the module (tests/http/isolation_world.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import pytest
from litestar.testing import AsyncTestClient
from sqlalchemy import text

from adapters.postgres.database import org_connection
from domain.tool_servers import ToolDefinition
from entrypoints.http.app import create_app
from tests.conftest import TABLES
from tests.fakes import FakeEmbedderRegistry
from tests.fakes.tool_servers import FakeToolConnector
from tests.http.chat_support import Holder, ScriptedModels, user_message
from tests.http.helpers import running_worker
from tests.http.isolation_world import (
    B_IDS_FROM,
    MARK,
    Operation,
    Org,
    Slot,
    api_snapshot,
    body,
    build_org,
    db_snapshot,
    db_tokens,
    json_schema,
    move_sequences,
    operations,
    probe_zip,
    rls_tables,
    sample,
    skill_md,
)
from tests.http.processing_support import EmbedderOverride
from tests.http.tool_support import ToolConnectorOverride

# Operations that take no member's token, each with the reason it is out of the matrix.
PUBLIC = {
    ("GET", "/health"): "the health summary: the same answer to everyone, naming no organization",
    ("GET", "/health/live"): "liveness: the same answer to everyone, naming no organization",
    ("GET", "/health/ready"): "readiness: the state of the database, storage and queue only",
    ("GET", "/metrics"): "Prometheus counters of the whole process, behind its own token",
    ("GET", "/.well-known/jwks.json"): "the public keys of the development identity provider",
    ("POST", "/webhooks/identity"): "the identity provider's events, signed with its secret",
    ("POST", "/webhooks/inbound-email"): "inbound mail, signed with the mail relay's secret",
    ("PUT", "/storage/{key}"): "an upload receipt: the signature in the address binds the key",
}

# Every organization's tool server offers this tool; a call of it waits for approval.
PROBE_TOOL = ToolDefinition(name="probe", description="A probe", input_schema={"type": "object"})

# Identifiers that never existed anywhere: what B's are compared with.
MISSING_UUID = "00000000-0000-4000-8000-000000000000"
MISSING = {
    "kb": B_IDS_FROM - 1, "agent": B_IDS_FROM - 1, "tag": B_IDS_FROM - 1,
    "skill": B_IDS_FROM - 1, "task": B_IDS_FROM - 1, "toolserver": B_IDS_FROM - 1,
    "file": MISSING_UUID,
    "thread": MISSING_UUID, "user": "user_nobody0", "invitation": "inv_nobody0",
    "filekey": f"orgs/org_nobody/files/{MISSING_UUID}/probe.md",
    "contentkey": f"orgs/org_nobody/files/{MISSING_UUID}/content.md",
    "skillpath": "references/nobody.md", "approval": MISSING_UUID,
}  # fmt: skip
REFUSED = {403, 404}
# (method, path, field) whose foreign id is answered otherwise than 403/404, and why: a rule of
# CONTRACT.md, or (marked "silent") the service's rule where the contract says nothing. Either
# way the answer must equal the answer to an id that never existed.
JUSTIFIED: dict[tuple[str, str, str], tuple[set[int], str]] = {
    ("POST", "/kb/files", "fileKey"): (
        {400}, "POST /kb/files refuses a fileKey outside the caller's organization prefix (400)"
    ),
    ("POST", "/kb/files", "contentKey"): ({400}, "the same rule for the content key"),
    ("POST", "/kb/files", "fileId"): (
        {400}, "fileKey = orgs/<orgId>/files/<fileId>/<name>: another fileId than the key's is "
        "refused by its shape, before any lookup"
    ),
    ("PUT", "/orgSettings", "defaultAgentId"): (
        {400}, "defaultAgentId must be null or an agent of the organization: a 400 details entry"
    ),
    ("POST", "/admin/bulkRemove", "userIds"): (
        {207}, "a user who is not a member is a failure entry; not all removed -> 207"
    ),
    ("DELETE", "/admin/users", "userIds"): ({207}, "not every entry succeeded -> 207"),
    ("DELETE", "/admin/users", "invitationIds"): ({207}, "not every entry succeeded -> 207"),
    ("GET", "/agents", "tagId"): (
        {200}, "silent; GET /agents documents tagId as a filter of the caller's agents: none"
    ),
    ("GET", "/conversations", "agentId"): (
        {200}, "GET /conversations?agentId= lists the caller's conversations (a filter): none"
    ),
    **{
        (method, "/agents", name): (
            {400}, "silent; an agent's id lists must name records of its organization, else 400 "
            "'Unknown … ids' (test_fuzz_openapi.DATA_DEPENDENT)"
        )
        for method in ("POST", "PATCH")
        for name in ("knowledgeBaseIds", "skillIds", "tagIds")
    },
}  # fmt: skip
# Tables outside row-level security, each with the reason.
NO_RLS = {
    "alembic_version": "the schema's migration version",
    "webhook_receipts": "the identity provider's delivery ids, one deployment-wide inbox",
    **dict.fromkeys(
        ("pgqueuer", "pgqueuer_log", "pgqueuer_statistics", "pgqueuer_schedules",
         "pgqueuer_job_runs"),
        "the job queue: every worker takes any organization's job (the payload names it)",
    ),
}  # fmt: skip
# Tenant tables the world leaves empty for B: rows that live only while work is under way, and
# mail that needs a deployment's inbound domain and secret.
NOT_POPULATED = {
    "embedding_parts": "the parts of a file being embedded, gone once it is indexed",
    "staged_chunks": "chunks staged while a file is processed, gone once it is indexed",
    "spend_reservations": "a model call's reservation, gone once the call settles",
    "inbound_emails": "inbound e-mail is off in the test settings (no domain or secret)",
}


@dataclass
class World:
    client: AsyncTestClient
    a: Org
    b: Org
    doc: dict[str, Any]
    tokens: set[str]
    failures: list[str] = field(default_factory=list)
    leaks: list[str] = field(default_factory=list)
    calls: int = 0


@pytest.fixture(scope="module")
async def world(settings, database, idp, owner_engine) -> AsyncIterator[World]:
    async with owner_engine.begin() as connection:
        await connection.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))
    holder, registry = Holder(), FakeEmbedderRegistry()
    connector = FakeToolConnector()  # no tool server is ever connected to

    def worker() -> Any:
        providers = (
            ScriptedModels(holder),
            EmbedderOverride(registry),
            ToolConnectorOverride(connector),
        )
        return running_worker(settings, database, *providers, concurrency=2)

    app = create_app(
        settings,
        database,
        ScriptedModels(holder),
        EmbedderOverride(registry),
        ToolConnectorOverride(connector),
    )
    async with AsyncTestClient(app=app) as client:
        for mark in ("aprobe", MARK):
            connector.tools[f"http://127.0.0.1:9/{mark}"] = [PROBE_TOOL]
        a = await build_org(client, idp, worker, "org_aprobe", "aprobe", holder)
        await move_sequences(owner_engine, B_IDS_FROM)
        b = await build_org(client, idp, worker, f"org_{MARK}", MARK, holder)
        await move_sequences(owner_engine, None)
        doc = (await client.get("/schema/openapi.json")).json()
        tokens = await db_tokens(owner_engine, b.org) | {b.org}
        tokens |= {str(v) for values in b.ids.values() for v in values}
        yield World(client, a, b, doc, {t for t in tokens if len(t) >= 6})
    async with owner_engine.begin() as connection:  # the next module starts from empty tables
        await connection.execute(text(f"TRUNCATE {TABLES} RESTART IDENTITY CASCADE"))


def variants(op: Operation) -> Iterator[tuple[str, dict[Slot, str]]]:
    """(name, role of each slot): every slot B's; then, with more than one slot, each slot B's
    alone with the other required slots A's own (so the check of that one slot is reached)."""
    ids = [s for s in op.slots if s.kind != "cursor"]
    if ids:
        yield "all B", {s: "B" for s in ids}
    if len(ids) > 1:
        for slot in ids:
            others = {s: "A" for s in ids if s.required and s != slot}
            yield f"{slot.name} B", {**others, slot: "B"}
    for slot in (s for s in op.slots if s.kind == "cursor"):
        yield "cursor B", {**{s: "A" for s in ids if s.required}, slot: "B"}


def request(w: World, op: Operation, roles: dict[Slot, str]) -> dict[str, Any]:
    def value(slot: Slot) -> Any:
        role = roles[slot]
        one = {"A": w.a.first, "B": w.b.first}.get(role, MISSING.get)(slot.kind)
        return [one] if slot.array else one

    path, params = op.path, {}
    for slot in roles:
        if slot.where == "path":
            path = path.replace("{" + slot.name + "}", str(value(slot)))
        elif slot.where == "query":
            params[slot.name] = value(slot)
    for param in op.spec.get("parameters", []):
        if param["in"] == "query" and param.get("required") and param["name"] not in params:
            params[param["name"]] = sample(w.doc, param["name"], param.get("schema", {}))
    call: dict[str, Any] = {"method": op.method, "url": path, "params": params}
    schema = json_schema(w.doc, op.spec)
    if schema is not None:
        placed = {s.keys: value(s) for s in roles if s.where == "body"}
        call["json"] = body(w.doc, schema, placed)
    elif "requestBody" in op.spec:
        call["content"] = probe_zip()
        call["headers"] = {"Content-Type": "application/zip"}
    call["headers"] = {**call.get("headers", {}), **w.a.headers}
    return call


async def send(w: World, call: dict[str, Any]) -> Any:
    w.calls += 1
    return await w.client.request(**call)


def b_data(w: World, call: dict[str, Any], response: Any) -> list[str]:
    """B's identifiers and text in the response that the request did not carry itself."""
    sent = json.dumps({k: v for k, v in call.items() if k != "content"}, default=str)
    seen = response.text + "\n" + "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    found = sorted(t for t in w.tokens if t in seen and t not in sent)
    if MARK in seen.lower() and MARK not in sent.lower():
        found.append(MARK)
    return found


def normal(w: World, response: Any, roles: dict[Slot, str]) -> tuple[int, str]:
    found = response.text
    for slot in roles:
        for value in (w.b.first(slot.kind), MISSING.get(slot.kind)):
            if value is not None:
                found = found.replace(str(value), "<id>")
    return response.status_code, found


async def check(w: World, op: Operation, name: str, roles: dict[Slot, str]) -> None:
    """One variant: the call with ids that never existed, then with B's; compared."""
    label = f"{op.label} [{name}]"
    call = request(w, op, roles)
    if name == "cursor B":  # a position in the caller's own list, never a record of B's
        response = await send(w, call)
        w.leaks += [f"{label}: {t}" for t in b_data(w, call, response)]
        if response.status_code >= 500:
            w.failures.append(f"{label}: {response.status_code}")
        return
    nowhere = {s: r.replace("B", "missing") for s, r in roles.items()}
    missing = await send(w, request(w, op, nowhere))
    response = await send(w, call)
    w.leaks += [f"{label}: {t}" for t in b_data(w, call, response)]
    allowed = set(REFUSED)
    for slot in (s for s, r in roles.items() if r == "B"):
        allowed |= JUSTIFIED.get((op.method, op.path, slot.name), (set(), ""))[0]
    if response.status_code not in allowed:
        w.failures.append(f"{label}: {response.status_code} {response.text[:300]}")
    if normal(w, response, roles) != normal(w, missing, roles):
        w.failures.append(
            f"{label}: B's ids answered {normal(w, response, roles)}, "
            f"ids that never existed {normal(w, missing, roles)}"
        )


@pytest.fixture(scope="module")
async def matrix(world: World, owner_engine) -> dict[str, Any]:
    """Runs the matrix once; what B reads and holds before and after it."""
    w = world
    before = (await api_snapshot(w.client, w.b), await db_snapshot(owner_engine, w.b.org))
    for op in operations(w.doc):
        if (op.method, op.path) in PUBLIC:
            continue
        cases = list(variants(op))
        # A's own listings and creations, with no id of B: still nothing of B in the answer.
        if not op.slots or (op.method == "GET" and not any(s.required for s in op.slots)):
            call = request(w, op, {})
            response = await send(w, call)
            if response.status_code >= 300:
                w.failures.append(f"{op.label}: {response.status_code} {response.text[:200]}")
            w.leaks += [f"{op.label}: {t}" for t in b_data(w, call, response)]
        for name, roles in cases:
            await check(w, op, name, roles)
    after_db = await db_snapshot(owner_engine, w.b.org)
    after = (await api_snapshot(w.client, w.b), after_db)
    return {"before": before, "after": after}


async def test_the_public_operations_skipped_are_in_the_document_and_are_all_of_them(world):
    ops = {(op.method, op.path): op for op in operations(world.doc)}
    assert set(PUBLIC) <= set(ops)
    unauthenticated = {key for key, op in ops.items() if op.spec.get("security") == []}
    assert unauthenticated == set(PUBLIC)


async def test_every_id_like_field_has_a_kind(world):
    ops = [op for op in operations(world.doc) if (op.method, op.path) not in PUBLIC]
    unknown = {op.label: op.unknown for op in ops if op.unknown}
    assert unknown == {}, "add these to KINDS (or NOT_IDS with a reason)"
    assert {(m, p) for m, p, _ in JUSTIFIED} <= {(o.method, o.path) for o in operations(world.doc)}


async def test_b_ids_and_text_are_found_in_b_own_reads(world, matrix):
    """The detector is not blind: what B reads of itself shows B's marks and ids."""
    assert {status for status, _ in matrix["before"][0].values()} == {200}
    assert MARK in matrix["before"][0]["search"][1]["results"][0]["text"]  # B's file has chunks
    own = json.dumps(matrix["before"][0], default=str)
    assert MARK in own
    kinds = ("kb", "file", "agent", "tag", "skill", "thread", "task", "run", "user", "invitation")
    assert all(str(world.b.first(kind)) in own for kind in kinds)
    assert all(str(world.b.first(kind)) in world.tokens for kind in kinds)


async def test_every_operation_refuses_b_ids_as_it_refuses_missing_ones(world, matrix):
    assert world.calls > 100
    assert world.failures == [], "\n".join(world.failures)


async def test_no_response_to_a_carries_b_ids_or_text(world, matrix):
    assert world.leaks == [], "\n".join(world.leaks)


async def test_b_reads_and_holds_the_same_afterwards(world, matrix):
    before_api, before_db = matrix["before"]
    after_api, after_db = matrix["after"]
    assert {t: d for t, d in after_db.items() if before_db[t] != d} == {}
    changed = {
        k: (before_api[k], after_api[k]) for k in before_api if after_api[k] != before_api[k]
    }
    assert changed == {}


async def test_the_app_role_sees_no_row_of_b(world, matrix, owner_engine, app_pool):
    tables = await rls_tables(owner_engine)
    assert {t for t, secured in tables.items() if not secured} == set(NO_RLS)
    problems, populated = [], set()
    for table in (t for t, secured in tables.items() if secured):
        async with owner_engine.connect() as connection:
            count = f"SELECT count(*) FROM {table} WHERE org_id = :org"
            if await connection.scalar(text(count), {"org": world.b.org}):
                populated.add(table)
        for org in (None, world.a.org):
            try:
                async with org_connection(app_pool, org) as db:
                    ((b_rows, other),) = await db.fetch(
                        f"SELECT count(*) FILTER (WHERE org_id = $1), "
                        f"count(*) FILTER (WHERE org_id IS DISTINCT FROM $2) FROM {table}",
                        world.b.org,
                        org or "",
                    )
            except asyncpg.InsufficientPrivilegeError:
                continue  # the app role may not read it at all
            if b_rows or other:
                problems.append(f"{table} as {org}: {b_rows} of B's rows, {other} not {org}'s")
    assert problems == [], "\n".join(problems)
    assert set(tables) - set(NO_RLS) - populated == set(NOT_POPULATED)


async def test_one_user_in_both_organizations_sees_in_a_nothing_of_b(world, matrix, idp):
    """The same user, a member of both, with a token of A: B's conversation and metadata of that
    user stay in B."""
    c, b, user = world.client, world.b, "user_shared1"
    as_b = {"Authorization": f"Bearer {idp.issue(user_id=user, org_id=b.org, role='member')}"}
    sent = await c.post(
        "/chat",
        json={"agentId": b.first("agent"), "messages": user_message(f"{MARK} shared question")},
        headers={**as_b, "X-Stream-Response": "false"},
    )
    assert sent.status_code == 202, sent.text
    thread = sent.json()["threadId"]
    meta = {"userId": user, "metadata": {"note": f"{MARK} shared"}}
    assert (await c.post("/admin/updateUserMetadata", json=meta, headers=b.headers)).is_success
    as_a = {"Authorization": f"Bearer {idp.issue(user_id=user, org_id=world.a.org, role='admin')}"}
    answers = [
        await c.get("/conversations", headers=as_a),
        await c.get("/admin/getUsersInOrg", headers=as_a),
        await c.get("/admin/audit-log", headers=as_a),
        await c.post("/admin/updateUserMetadata", json={**meta, "metadata": {}}, headers=as_a),
    ]
    assert [r.status_code for r in answers] == [200, 200, 200, 200]
    refused = [
        await c.get("/getConversation", params={"threadId": thread}, headers=as_a),
        await c.get(f"/chat/{thread}/stream", headers=as_a),
        await c.post(f"/chat/{thread}/cancel", headers=as_a),
        await c.patch("/api/renameConversation", json={"threadId": thread, "name": "x"},
                      headers=as_a),
        await c.delete("/conversations", params={"threadId": thread}, headers=as_a),
    ]  # fmt: skip
    assert [r.status_code for r in refused] == [404] * len(refused)
    seen = [r.text for r in answers + refused]
    assert [t for t in seen if MARK in t or thread in t] == []
    kept = await c.get("/getConversation", params={"threadId": thread}, headers=b.headers)
    assert kept.status_code == 200 and kept.json()["title"] != "x"
    members = (await c.get("/admin/getUsersInOrg", headers=b.headers)).json()
    assert next(m for m in members if m["id"] == user)["publicMetadata"] == meta["metadata"]


async def test_names_and_addresses_are_unique_per_organization_only(world, matrix):
    """A may use the names B uses: a clash with B would tell A that B has them. (Last: A's
    records then carry B's mark.)"""
    c, h = world.client, world.a.headers
    for path, payload in (
        ("/skills/manage", {"skillMd": skill_md(f"{MARK}-skill", "mine")}),
        ("/agents/tags", {"name": f"{MARK} tag"}),
        ("/tools", {"name": f"{MARK}-tools", "kind": "mcp", "url": "http://127.0.0.1:9/a"}),
        ("/admin/invitations", {"email": f"{MARK}-invitee@x.test", "role": "org:member"}),
    ):
        response = await c.post(path, json=payload, headers=h)
        assert response.status_code == 201, (path, response.text)
