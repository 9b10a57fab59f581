"""Migrating as a schema owner that is not a superuser (a managed database, README "An external
PostgreSQL"): the migrations run, and the roll-ups they fill count the rows already there, which
row-level security forced on the owner would hide from them (a superuser bypasses it)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal

import asyncpg
from sqlalchemy import make_url

from adapters.postgres.database import asyncpg_dsn
from adapters.postgres.embedded import start_embedded_postgres
from adapters.postgres.migrations import migrate
from adapters.postgres.vector_indexes import dedicated_index_name, keep_vector_indexes


async def as_owner(url: str, statements: list[tuple[str, tuple[object, ...]]], org: str) -> None:
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        await connection.execute("SELECT set_config('app.org_id', $1, false)", org)
        for sql, args in statements:
            await connection.execute(sql, *args)
    finally:
        await connection.close()


async def owned_database(tmp_root, name: str, app_role: str, *, granted: bool) -> tuple[str, str]:
    """A database owned by a new non-superuser role with CREATEROLE, pgvector created in it by
    the administrator; with `granted`, the administrator also made the app role and granted
    it to the owner (README, "An external PostgreSQL"). The owner's and the administrator's URLs."""
    _, admin_url = start_embedded_postgres(tmp_root / "pg", database="ap_admin")
    owner = f"{name}_owner"
    admin = await asyncpg.connect(asyncpg_dsn(admin_url))
    try:
        await admin.execute(f"CREATE ROLE {owner} LOGIN NOSUPERUSER CREATEROLE")
        await admin.execute(f"CREATE DATABASE {name} OWNER {owner}")
        if granted:
            await admin.execute(f"CREATE ROLE {app_role} NOLOGIN NOSUPERUSER NOBYPASSRLS")
            await admin.execute(f"GRANT {app_role} TO {owner}")
    finally:
        await admin.close()
    url = make_url(admin_url).set(database=name)
    admin = await asyncpg.connect(asyncpg_dsn(url.render_as_string(hide_password=False)))
    try:
        await admin.execute("CREATE EXTENSION vector")
    finally:
        await admin.close()
    admin_database = url.render_as_string(hide_password=False)
    return url.set(username=owner).render_as_string(hide_password=False), admin_database


async def test_the_app_role_made_and_granted_by_an_administrator_beforehand(tmp_root, monkeypatch):
    app_role = f"ap_app_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("AP_DATABASE_APP_ROLE", app_role)
    owner_url, _ = await owned_database(
        tmp_root, f"ap_granted_{app_role[-8:]}", app_role, granted=True
    )
    await migrate(owner_url)
    connection = await asyncpg.connect(asyncpg_dsn(owner_url))
    try:
        await connection.execute(f"SET ROLE {app_role}")
        assert await connection.fetchval("SELECT count(*) FROM knowledge_bases") == 0
    finally:
        await connection.close()


async def test_a_non_superuser_owner_migrates_and_the_roll_ups_count_existing_rows(
    tmp_root, monkeypatch
):
    # A role of its own, which the owner creates (the cluster may hold the default one).
    app_role = f"ap_app_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("AP_DATABASE_APP_ROLE", app_role)
    owner_url, admin_url = await owned_database(
        tmp_root, f"ap_owned_{app_role[-8:]}", app_role, granted=False
    )

    await migrate(owner_url, "0008")
    usage = (
        "INSERT INTO usage_events (org_id, user_id, purpose, model, input_tokens, "
        "output_tokens, cost_usd, created_at) VALUES ($1, 'u1', 'chat', 'openai:m', 10, 5, $2, $3)"
    )
    for org, costs in (("org_a", ("1.25", "2.50")), ("org_b", ("0.75",))):
        await as_owner(
            owner_url,
            [
                (usage, (org, Decimal(cost), datetime(2026, 11, 20 + i, 12, tzinfo=UTC)))
                for i, cost in enumerate(costs, start=1)
            ],
            org,
        )

    await migrate(owner_url, "0012")
    kb = await asyncpg.connect(asyncpg_dsn(owner_url))
    try:
        await kb.execute("SELECT set_config('app.org_id', 'org_a', false)")
        kb_id = await kb.fetchval(
            "INSERT INTO knowledge_bases (org_id, user_id, name, description, embedding_model, "
            "embedding_dimensions) VALUES ('org_a', 'u1', 'Docs', '', 'local:m', 3) RETURNING id"
        )
        for size, passages, status in ((100, 2, "completed"), (50, 1, "parsing")):
            file_id = await kb.fetchval(
                "INSERT INTO knowledge_base_files (org_id, knowledge_base_id, file_id, file_name,"
                " file_key, content_key, content_type, file_size, processing_status) VALUES "
                "('org_a', $1, gen_random_uuid(), 'a.md', 'k', 'c', 'text/markdown', $2, $3) "
                "RETURNING id",
                kb_id,
                size,
                status,
            )
            for index in range(passages):
                await kb.execute(
                    "INSERT INTO chunks (org_id, knowledge_base_id, file_record_id, "
                    "embedding_model, dimensions, chunk_index, start_char, end_char, text, "
                    "embedding) VALUES ('org_a', $1, $2, 'local:m', 3, $3, 0, 1, 'x', "
                    "'[1,0,0]')",
                    kb_id,
                    file_id,
                    index,
                )
    finally:
        await kb.close()

    await migrate(owner_url)
    check = await asyncpg.connect(asyncpg_dsn(admin_url))
    try:
        daily = await check.fetch(
            "SELECT org_id, day::text, cost_usd FROM usage_daily ORDER BY 1, 2"
        )
        stats = await check.fetchrow(
            "SELECT file_count, total_size, files_in_progress, chunk_count "
            "FROM knowledge_base_stats WHERE knowledge_base_id = $1",
            kb_id,
        )
        forced = await check.fetchval(
            "SELECT bool_and(relforcerowsecurity) FROM pg_class WHERE relname = ANY($1)",
            ["usage_events", "usage_daily", "knowledge_bases", "chunks", "knowledge_base_stats"],
        )
    finally:
        await check.close()
    assert [tuple(r) for r in daily] == [
        ("org_a", "2026-11-21", Decimal("1.25")),
        ("org_a", "2026-11-22", Decimal("2.50")),
        ("org_b", "2026-11-21", Decimal("0.75")),
    ]
    assert tuple(stats) == (2, 150, 1, 3)
    assert forced is True

    # As that owner, the worker's sweep reads the knowledge base's dimension count in its
    # organization and builds its own vector index; the totals' trigger, run as the owner
    # (0016), still follows a file the app role adds.
    owner = await asyncpg.connect(asyncpg_dsn(owner_url))
    try:
        sweep = await keep_vector_indexes(owner, min_passages=3)
        assert sweep.built == [dedicated_index_name(kb_id, 3)]
        # With no organization set, the owner still reads across organizations through its
        # own policies (0017), and the app role reads nothing.
        await owner.execute("SELECT set_config('app.org_id', '', false)")
        seen_by_owner = await owner.fetchrow(
            "SELECT (SELECT count(*) FROM knowledge_bases), "
            "(SELECT count(*) FROM knowledge_base_files), (SELECT count(*) FROM chunks)"
        )
        await owner.execute(f'SET ROLE "{app_role}"')
        seen_by_app = await owner.fetchrow(
            "SELECT (SELECT count(*) FROM knowledge_bases), "
            "(SELECT count(*) FROM knowledge_base_files)"
        )
        assert (tuple(seen_by_owner), tuple(seen_by_app)) == ((1, 2, 0), (0, 0))
        await owner.execute("SELECT set_config('app.org_id', 'org_a', false)")
        await owner.execute(
            "INSERT INTO knowledge_base_files (org_id, knowledge_base_id, file_id, file_name, "
            "file_key, content_key, content_type, file_size, processing_status, chunk_count) "
            "VALUES ('org_a', $1, gen_random_uuid(), 'b.md', 'k', 'c', 'text/markdown', 7, "
            "'completed', 4)",
            kb_id,
        )
        totals = await owner.fetchrow(
            "SELECT file_count, total_size, chunk_count FROM knowledge_base_stats "
            "WHERE knowledge_base_id = $1",
            kb_id,
        )
    finally:
        await owner.close()
    assert tuple(totals) == (3, 157, 7)
