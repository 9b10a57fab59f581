"""Row-level security: the owner's way through is a policy of its own, applied to the owner only.

Eight tables let their owner through (the reaper, the sweeps and the security-definer functions
read across organizations as the owner) with one policy, `org_id = current_setting('app.org_id')
OR current_user = (SELECT tableowner FROM pg_tables WHERE tablename = '<table>')`, and
`knowledge_bases` had a second one of the same kind for the inbound-mail look-up (0010). Postgres
adds every policy of a table to every statement that reads it, whoever runs it, so each of the
app role's statements carried the `pg_tables` sub-query (a view over four catalogs) into its
plan: with the plans asyncpg gets (custom, made at every execution), listing 50 knowledge bases
cost the database 553 µs as the app role against 287 µs without row-level security.

Each such policy becomes two permissive policies: `org_isolation`, the organization's check for
everyone, and `owner_access ... TO <owner> USING (true) WITH CHECK (true)` (for `knowledge_bases`,
`inbound_email_lookup ... FOR SELECT TO <owner>`), which Postgres leaves out of the plans of any
role that has not the owner's privileges. Who sees what is unchanged: the app role is not a member
of the owner (the owner is a member of the app role, migration 0001). Unlike the sub-query, which
followed the owner but looked the table up by name in every schema (and failed on a same-named
table elsewhere), a policy names its role when it is made: after `ALTER TABLE ... OWNER TO`
another role, run this migration's `downgrade` and `upgrade` again (README, "An external
PostgreSQL").

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

TABLES = (
    "knowledge_base_files",
    "conversations",
    "chat_messages",
    "chat_runs",
    "chat_run_chunks",
    "scheduled_tasks",
    "scheduled_runs",
    "knowledge_base_stats",
)
ORG = "org_id = current_setting('app.org_id', true)"


def _owner_check(table: str) -> str:
    return f"current_user = (SELECT tableowner FROM pg_tables WHERE tablename = '{table}')"


def _for_owner(statement: str, table: str) -> None:
    """Runs `statement` with `%I` replaced by the quoted name of `table`'s owner (in the
    migration's own schema), in SQL, so that `alembic upgrade --sql` writes it too."""
    quoted = statement.replace("'", "''")
    op.execute(
        f"""
        DO $$ BEGIN
            EXECUTE format('{quoted}', (
                SELECT pg_get_userbyid(c.relowner) FROM pg_class c
                WHERE c.oid = to_regclass(quote_ident(current_schema()) || '.{table}')));
        END $$
        """
    )


def upgrade() -> None:
    for table in TABLES:
        op.execute(f"DROP POLICY org_isolation ON {table}")
        op.execute(f"CREATE POLICY org_isolation ON {table} USING ({ORG}) WITH CHECK ({ORG})")
        _for_owner(
            f"CREATE POLICY owner_access ON {table} TO %I USING (true) WITH CHECK (true)", table
        )
    op.execute("DROP POLICY inbound_email_lookup ON knowledge_bases")
    _for_owner(
        "CREATE POLICY inbound_email_lookup ON knowledge_bases FOR SELECT TO %I USING (true)",
        "knowledge_bases",
    )


def downgrade() -> None:
    op.execute("DROP POLICY inbound_email_lookup ON knowledge_bases")
    op.execute(
        "CREATE POLICY inbound_email_lookup ON knowledge_bases FOR SELECT USING ("
        f"{_owner_check('knowledge_bases')})"
    )
    for table in TABLES:
        op.execute(f"DROP POLICY owner_access ON {table}")
        op.execute(f"DROP POLICY org_isolation ON {table}")
        check = f"{ORG} OR {_owner_check(table)}"
        op.execute(f"CREATE POLICY org_isolation ON {table} USING ({check}) WITH CHECK ({check})")
