"""Scheduled tasks over HTTP and through the worker: the endpoints' rules, run-now and the skip
rule, a run that goes through the chat use case into a conversation, and the runs that fail
(spend cap, agent or task gone)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import text

from adapters.scheduling.cron import CronsimSchedule
from domain.schedules import AGENT_GONE, TASK_GONE
from tests.fakes.chat import text_script
from tests.http.chat_support import ScriptedModels, make_agent, script
from tests.http.helpers import running_worker

CRON = CronsimSchedule()
TASK = {"name": "Morning digest", "prompt": "Summarise yesterday.", "cron": "0 8 * * 1-5"}


async def create(client, who, agent_id: int, **fields: Any) -> dict[str, Any]:
    response = await client.post(
        "/scheduled-tasks", json={"agentId": agent_id, **TASK, **fields}, headers=who.headers
    )
    assert response.status_code == 201, response.text
    return response.json()["task"]


async def run_now(client, who, task_id: int) -> dict[str, Any]:
    response = await client.post(
        "/scheduled-tasks/run", json={"taskId": task_id}, headers=who.headers
    )
    assert response.status_code == 202, response.text
    return response.json()["run"]


async def runs(client, who, task_id: int, **params: Any) -> dict[str, Any]:
    response = await client.get(
        "/scheduled-tasks/runs", params={"taskId": task_id, **params}, headers=who.headers
    )
    assert response.status_code == 200, response.text
    return response.json()


async def ended(client, who, task_id: int, run_id: str) -> dict[str, Any]:
    for _ in range(300):
        found = [r for r in (await runs(client, who, task_id))["runs"] if r["id"] == run_id]
        if found and found[0]["status"] in ("succeeded", "failed"):
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError("the run never ended")


@pytest.fixture
def worker(settings, database, holder) -> Callable:
    return lambda: running_worker(
        settings, database, ScriptedModels(holder), concurrency=1, attempts=2
    )


async def test_a_task_is_created_read_changed_and_deleted(chat, alice):
    agent = await make_agent(chat, alice)
    before = datetime.now(UTC)
    task = await create(chat, alice, agent["id"], timezone="Europe/Berlin")
    assert {k: task[k] for k in ("agentId", "name", "prompt", "cron", "timezone", "enabled")} == {
        "agentId": agent["id"], **TASK, "timezone": "Europe/Berlin", "enabled": True,
    }  # fmt: skip
    assert task["userId"] == alice.user and task["lastRunAt"] is None
    next_run = datetime.fromisoformat(task["nextRunAt"])
    assert next_run == CRON.next_occurrence("0 8 * * 1-5", "Europe/Berlin", before)
    listed = await chat.get("/scheduled-tasks", headers=alice.headers)
    assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]]
    one = await chat.get("/scheduled-tasks", params={"taskId": task["id"]}, headers=alice.headers)
    assert one.json() == {"success": True, "task": task}

    changed = await chat.patch(
        "/scheduled-tasks",
        json={"taskId": task["id"], "cron": "@hourly", "timezone": None, "name": "Hourly"},
        headers=alice.headers,
    )
    assert changed.status_code == 200, changed.text
    body = changed.json()["task"]
    assert (body["cron"], body["timezone"], body["name"]) == ("@hourly", "UTC", "Hourly")
    assert datetime.fromisoformat(body["nextRunAt"]).minute == 0
    disabled = await chat.patch(
        "/scheduled-tasks", json={"taskId": task["id"], "enabled": False}, headers=alice.headers
    )
    assert disabled.json()["task"]["nextRunAt"] is None

    gone = await chat.delete(
        "/scheduled-tasks", params={"taskId": task["id"]}, headers=alice.headers
    )
    assert gone.json() == {"success": True, "message": "Scheduled task deleted"}
    again = await chat.get("/scheduled-tasks", params={"taskId": task["id"]}, headers=alice.headers)
    assert again.status_code == 404
    assert again.json() == {"error": "Scheduled task not found"}


@pytest.mark.parametrize(
    ("fields", "status", "error"),
    [
        ({"cron": "61 * * * *"}, 400, "Invalid cron expression"),
        ({"cron": "@reboot"}, 400, "Invalid cron expression"),
        ({"cron": "* * * *"}, 400, "Invalid cron expression"),
        ({"timezone": "Mars/Olympus"}, 400, "Unknown time zone"),
        ({"prompt": ""}, 400, None),
        ({"prompt": "x" * 20_001}, 400, None),
        ({"prompt": "a\x00b"}, 400, None),
        ({"enabled": "yes"}, 400, None),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_created(chat, alice, fields, status, error):
    agent = await make_agent(chat, alice)
    response = await chat.post(
        "/scheduled-tasks",
        json={"agentId": agent["id"], **TASK, **fields},
        headers=alice.headers,
    )
    assert response.status_code == status, response.text
    if error is not None:
        assert response.json()["error"] == error
    listed = await chat.get("/scheduled-tasks", headers=alice.headers)
    assert listed.json()["tasks"] == []


async def test_managing_needs_an_agent_manager_and_other_organizations_stay_apart(
    chat, alice, bob, member
):
    agent = await make_agent(chat, alice)
    task = await create(chat, alice, agent["id"])
    someone = member("org_a", "user_carol", "member")
    refused = await chat.post(
        "/scheduled-tasks", json={"agentId": agent["id"], **TASK}, headers=someone.headers
    )
    assert refused.status_code == 403
    for method, path, kwargs in [
        ("patch", "/scheduled-tasks", {"json": {"taskId": task["id"], "name": "x"}}),
        ("delete", "/scheduled-tasks", {"params": {"taskId": task["id"]}}),
        ("post", "/scheduled-tasks/run", {"json": {"taskId": task["id"]}}),
    ]:
        response = await getattr(chat, method)(path, headers=someone.headers, **kwargs)
        assert response.status_code == 403, (method, path)
    # Any member reads them; another organization sees none and cannot use this agent.
    listed = await chat.get("/scheduled-tasks", headers=someone.headers)
    assert [t["id"] for t in listed.json()["tasks"]] == [task["id"]]
    foreign = await chat.get("/scheduled-tasks", params={"taskId": task["id"]}, headers=bob.headers)
    assert foreign.status_code == 404
    admin_b = member("org_b", "user_boss", "admin")
    stolen = await chat.post(
        "/scheduled-tasks", json={"agentId": agent["id"], **TASK}, headers=admin_b.headers
    )
    assert (stolen.status_code, stolen.json()) == (404, {"error": "Agent not found"})


async def test_run_now_follows_the_skip_rule_and_runs_page_newest_first(chat, alice):
    agent = await make_agent(chat, alice)
    task = await create(chat, alice, agent["id"], enabled=False)
    first = await run_now(chat, alice, task["id"])
    assert (first["status"], first["threadId"], first["taskId"]) == ("queued", None, task["id"])
    second = await run_now(chat, alice, task["id"])
    assert second["status"] == "skipped" and second["finishedAt"] is not None
    page = await runs(chat, alice, task["id"], limit=1)
    assert [r["id"] for r in page["runs"]] == [second["id"]]
    rest = await runs(chat, alice, task["id"], limit=1, cursor=page["nextCursor"])
    assert [r["id"] for r in rest["runs"]] == [first["id"]] and rest["nextCursor"] is None
    bad = await chat.get(
        "/scheduled-tasks/runs",
        params={"taskId": task["id"], "cursor": "nope"},
        headers=alice.headers,
    )
    assert bad.status_code == 400
    read = await chat.get("/scheduled-tasks", params={"taskId": task["id"]}, headers=alice.headers)
    assert read.json()["task"]["nextRunAt"] is None  # run-now leaves the schedule alone
    # The task shows its latest run: the skipped one, at that run's time.
    shown = read.json()["task"]
    assert (shown["lastRunStatus"], shown["lastRunAt"]) == ("skipped", second["scheduledFor"])


async def test_a_run_sends_the_prompt_to_the_agent_in_a_new_conversation(
    chat, alice, holder, worker
):
    script(holder, text_script("Yesterday: ", "three new files."))
    agent = await make_agent(chat, alice)
    task = await create(chat, alice, agent["id"])
    queued = await run_now(chat, alice, task["id"])
    async with worker():
        run = await ended(chat, alice, task["id"], queued["id"])
    assert run["status"] == "succeeded", run
    assert run["error"] is None and run["startedAt"] and run["finishedAt"]
    conversation = await chat.get(
        "/getConversation", params={"threadId": run["threadId"]}, headers=alice.headers
    )
    body = conversation.json()
    assert body["title"] == "Morning digest" and body["agentId"] == agent["id"]
    assert [(m["role"], m["parts"][0]["text"]) for m in body["messages"]] == [
        ("user", "Summarise yesterday."),
        ("assistant", "Yesterday: three new files."),
    ]
    read = await chat.get("/scheduled-tasks", params={"taskId": task["id"]}, headers=alice.headers)
    shown = read.json()["task"]
    assert (shown["lastRunStatus"], shown["lastRunAt"]) == ("succeeded", run["scheduledFor"])
    assert shown["lastRunAt"].endswith("Z")


async def test_runs_fail_with_the_reason_when_a_cap_agent_or_task_stops_them(
    chat, alice, holder, worker, owner_engine
):
    script(holder, text_script("never"), text_script("never"))
    agent = await make_agent(chat, alice)
    other = await make_agent(chat, alice, name="Other")
    capped = await create(chat, alice, agent["id"])
    orphan = await create(chat, alice, other["id"], name="Orphan")
    deleted = await create(chat, alice, agent["id"], name="Deleted")
    async with owner_engine.begin() as connection:
        await connection.execute(
            text("INSERT INTO org_settings (org_id, settings) VALUES (:org, CAST(:s AS jsonb))"),
            {"org": alice.org, "s": json.dumps({"spendCaps": {"daily": 0}})},
        )
    refused = await run_now(chat, alice, capped["id"])
    lost_agent = await run_now(chat, alice, orphan["id"])
    await chat.delete("/agents", params={"agentId": other["id"]}, headers=alice.headers)
    lost_task = await run_now(chat, alice, deleted["id"])
    await chat.delete("/scheduled-tasks", params={"taskId": deleted["id"]}, headers=alice.headers)
    async with worker():
        capped_run = await ended(chat, alice, capped["id"], refused["id"])
        orphan_run = await ended(chat, alice, orphan["id"], lost_agent["id"])
        for _ in range(300):
            async with owner_engine.connect() as connection:
                status, error = (
                    await connection.execute(
                        text("SELECT status, error FROM scheduled_runs WHERE id = :id"),
                        {"id": lost_task["id"]},
                    )
                ).one()
            if status == "failed":
                break
            await asyncio.sleep(0.05)
    assert capped_run["status"] == "failed"
    assert capped_run["error"].startswith("Spend cap reached: the daily cap of $0.00")
    assert capped_run["threadId"] is None
    assert (orphan_run["status"], orphan_run["error"]) == ("failed", AGENT_GONE)
    assert (status, error) == ("failed", TASK_GONE)
    assert holder.model.requests == []
    read = await chat.get(
        "/scheduled-tasks", params={"taskId": capped["id"]}, headers=alice.headers
    )
    shown = read.json()["task"]
    assert (shown["lastRunStatus"], shown["lastRunAt"]) == ("failed", capped_run["scheduledFor"])
