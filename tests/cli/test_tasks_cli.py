"""`agent-platform tasks list` and `tasks run-now`, run in process against the test database."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import asyncpg

from adapters.postgres.database import asyncpg_dsn
from tests.cli.conftest import run


async def seed(url: str) -> int:
    """An agent and a daily task of `org_t`, written as the tables' owner."""
    connection = await asyncpg.connect(asyncpg_dsn(url))
    try:
        agent_id = await connection.fetchval(
            "INSERT INTO agents (org_id, user_id, name, description, role, model) "
            "VALUES ('org_t', 'u1', 'Digest', '', '', 'openai:scripted') RETURNING id"
        )
        return int(
            await connection.fetchval(
                "INSERT INTO scheduled_tasks (org_id, user_id, agent_id, name, prompt, cron, "
                "timezone, enabled, next_run_at) VALUES ('org_t', 'u1', $1, 'Morning digest', "
                "'Summarise.', '0 8 * * *', 'Europe/Berlin', true, $2) RETURNING id",
                agent_id,
                datetime(2026, 11, 24, 7, tzinfo=UTC),
            )
        )
    finally:
        await connection.close()


def test_tasks_are_listed_and_run_now_under_the_skip_rule(cli_env, capsys, database):
    task_id = asyncio.run(seed(database.url))
    code, out, _ = run(capsys, "tasks", "list", "--org", "org_t", "--json")
    assert code == 0
    (task,) = json.loads(out)
    assert (task["id"], task["name"], task["cron"], task["timezone"]) == (
        task_id, "Morning digest", "0 8 * * *", "Europe/Berlin",
    )  # fmt: skip
    # Times are written as HTTP writes them (ISO 8601 with `Z`).
    assert (task["nextRunAt"], task["lastRunAt"]) == ("2026-11-24T07:00:00Z", None)
    code, out, _ = run(capsys, "tasks", "list", "--org", "org_t")
    assert code == 0 and "Morning digest" in out and "0 8 * * *" in out

    code, out, _ = run(capsys, "tasks", "run-now", str(task_id), "--org", "org_t", "--json")
    assert code == 0 and json.loads(out)["status"] == "queued"
    code, out, _ = run(capsys, "tasks", "run-now", str(task_id), "--org", "org_t")
    assert code == 0 and out.strip().endswith(": skipped")
    code, out, _ = run(capsys, "tasks", "list", "--org", "org_t", "--json")
    (task,) = json.loads(out)
    assert task["lastRunStatus"] == "skipped" and task["lastRunAt"].endswith("Z")

    code, out, err = run(capsys, "tasks", "run-now", "999", "--org", "org_t")
    assert (code, out) == (1, "")
    assert "Scheduled task not found" in err
    code, out, _ = run(capsys, "tasks", "list", "--org", "org_other", "--json")
    assert (code, json.loads(out)) == (0, [])
