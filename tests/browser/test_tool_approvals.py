"""Tool calls that wait for the member's approval, in the console against a real `serve` (the
model scripted) and a real MCP server on loopback whose `echo` needs approval: approving shows
the tool's output and the rest of the answer in the same message; denying (with a reason) on a
reloaded page shows the call as denied and the model's answer after it; a reload while the
answer goes on after an approval follows it on; a decision the service refuses (already answered
elsewhere) is shown plainly and the stored state read again; an expired approval is only
dismissed (a denial), and the answer goes on; the buttons are disabled while a decision is
being sent; and the approval's controls have no serious accessibility violation."""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Locator, Page, Route, expect

from tests.browser.backend import Console, running_console, text_script, tool_call_script
from tests.browser.support import (
    Guard,
    ask,
    chat_status,
    last_answer,
    open_signed_in,
    serious_violations,
)
from tests.integration import tool_servers_support as tool_servers
from tests.integration.test_chat_model_openai import sse_delta, sse_head

TOOL = "kit__echo"
ECHOED = "hello from the tool"


@pytest.fixture(scope="module")
def console(tmp_root: Path) -> Iterator[Console]:
    """This module's own `serve`, allowed to reach tool servers on loopback."""
    home = Path(tempfile.mkdtemp(prefix="console-approvals-", dir=tmp_root))
    home.chmod(0o755)
    yield from running_console(home / "data", {"AP_TOOL_ALLOWED_HOSTS": "127.0.0.1"})


@pytest.fixture(scope="module")
def mcp_url() -> Iterator[str]:
    """The tests' MCP server (tests/integration/tool_servers_support.py) on 127.0.0.1, served
    from a thread of its own."""
    served = tool_servers.Served(tool_servers.mcp_app())
    yield f"{served.url}/mcp"
    served.stop()


def agent_with_guarded_echo(console: Console, mcp_url: str, org: str) -> str:
    """An organization whose agent "Operator" may call the MCP server's `echo`, each call
    waiting for approval; its admin's token."""
    token = console.token(org)
    with console.api(token) as api:
        server = api.post(
            "/tools",
            json={"name": "kit", "kind": "mcp", "url": mcp_url, "requireApproval": ["echo"]},
        )
        assert server.status_code == 201, server.text
        assert server.json()["toolServer"]["status"] == "ready", server.text
        grant = {"toolServerId": server.json()["toolServer"]["id"], "names": ["echo"]}
        agent = api.post("/agents", json={"name": "Operator", "tools": [grant]})
        assert agent.status_code == 201, agent.text
    return token


def approval(page: Page) -> Locator:
    return last_answer(page).get_by_role("group", name=re.compile(rf"^Tool call: {TOOL}"))


def waiting_for_approval(page: Page) -> Locator:
    """The approval of the echo call, once the answer has paused for it."""
    request = approval(page)
    expect(request).to_contain_text("waiting for approval")
    expect(request).to_contain_text(ECHOED)
    expect(chat_status(page)).to_have_text("Waiting for approval")
    return request


def stored_answer(console: Console, token: str) -> dict[str, Any]:
    with console.api(token) as api:
        listed = api.get("/conversations").json()["conversations"]
        assert len(listed) == 1, listed
        got = api.get("/getConversation", params={"threadId": listed[0]["threadId"]})
    assert got.status_code == 200, got.text
    return got.json()


def test_an_approved_call_is_made_and_the_answer_goes_on_in_the_same_message(
    console, mcp_url, guard: Guard
):
    token = agent_with_guarded_echo(console, mcp_url, "org_approve")
    plan = console.provider.plan(
        "approve the echo",
        tool_call_script(TOOL, {"text": ECHOED}),
        text_script("The tool said hello.", pieces=10, pause=0.2),
    )
    page = open_signed_in(guard, console.handoff(token))

    ask(page, "Please approve the echo.", agent="Operator")
    request = waiting_for_approval(page)
    assert len(plan.requests) == 1, "the model was asked again before the decision"
    request.get_by_role("button", name="Approve", exact=True).click()

    # The continuation is followed as it streams.
    expect(chat_status(page)).to_have_text("Answering…")
    answer = last_answer(page)
    expect(answer).to_contain_text("The tool said hello.")
    expect(chat_status(page)).to_have_text("Done")
    expect(approval(page)).to_have_count(0)
    summary = answer.locator("details.tool-call summary")
    expect(summary).to_have_text(f"Tool call: {TOOL} (done)")
    summary.click()
    expect(answer.locator("details.tool-call pre").nth(1)).to_contain_text(ECHOED)
    log = page.get_by_role("log")
    expect(log.get_by_role("article", name="Answer")).to_have_count(1)
    assert len(plan.requests) == 2

    stored = stored_answer(console, token)
    assert stored["streamStatus"] == "completed"
    assert [m["role"] for m in stored["messages"]] == ["user", "assistant"]
    parts = stored["messages"][-1]["parts"]
    assert [p["approved"] for p in parts if p["type"] == "tool-approval-response"] == [True]

    # Read back from the stored conversation, the message is the same.
    page.reload()
    expect(last_answer(page)).to_contain_text("The tool said hello.")
    expect(last_answer(page).locator("details.tool-call summary")).to_have_text(
        f"Tool call: {TOOL} (done)"
    )
    guard.check()


def test_a_denied_call_is_shown_denied_with_its_reason_and_the_answer_after_it(
    console, mcp_url, guard: Guard
):
    token = agent_with_guarded_echo(console, mcp_url, "org_deny")
    plan = console.provider.plan(
        "deny the echo",
        tool_call_script(TOOL, {"text": ECHOED}),
        text_script("Understood: I did not call it."),
    )
    page = open_signed_in(guard, console.handoff(token))
    ask(page, "Please deny the echo.", agent="Operator")
    waiting_for_approval(page)

    # The paused answer as the stored conversation gives it, after a reload.
    page.reload()
    request = waiting_for_approval(page)
    request.get_by_role("button", name="Deny", exact=True).click()
    request.get_by_label("Reason (optional)").fill("Not today")
    request.get_by_role("button", name="Deny", exact=True).click()

    answer = last_answer(page)
    expect(answer).to_contain_text("Understood: I did not call it.")
    expect(answer.get_by_text("Denied: Not today", exact=True)).to_be_visible()
    expect(answer.locator("details.tool-call summary")).to_have_text(f"Tool call: {TOOL} (denied)")
    expect(chat_status(page)).to_have_text("Done")
    expect(page.get_by_role("log").get_by_role("article", name="Answer")).to_have_count(1)
    # The model was told, and the tool was never called.
    told = [m for m in plan.requests[-1]["messages"] if m.get("role") == "tool"]
    assert len(told) == 1 and "Not today" in str(told[0]["content"]), told

    page.reload()
    expect(last_answer(page).get_by_text("Denied: Not today", exact=True)).to_be_visible()
    guard.check()


def test_an_expired_approval_is_dismissed_as_denied_and_the_answer_goes_on(
    console, mcp_url, guard: Guard
):
    token = agent_with_guarded_echo(console, mcp_url, "org_expired")
    plan = console.provider.plan(
        "let it expire",
        tool_call_script(TOOL, {"text": ECHOED}),
        text_script("No decision came: I did not call it."),
    )
    page = guard.new_page()
    page.clock.install()
    page.goto(console.handoff(token))
    ask(page, "Please let it expire.", agent="Operator")
    request = waiting_for_approval(page)
    expect(request.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    # Past the approval's `expiresAt` (a day, AP_TOOL_APPROVAL_TTL's default) in the page: its
    # only control is Dismiss. (The service's clock has not moved: it takes the dismissal as a
    # plain denial, as it would an expired one.)
    page.clock.fast_forward("24:00:01")
    expect(request).to_contain_text("approval expired")
    expect(request).to_contain_text("The approval expired: the call was not made.")
    expect(request.get_by_role("button")).to_have_count(1)
    dismiss = request.get_by_role("button", name="Dismiss", exact=True)
    with page.expect_request(
        lambda r: r.method == "POST" and r.url.endswith("/approvals")
    ) as posted:
        dismiss.click()
    body = posted.value.post_data_json
    assert body["approved"] is False and "reason" not in body, body

    answer = last_answer(page)
    expect(answer).to_contain_text("No decision came: I did not call it.")
    expect(answer.get_by_text("Denied", exact=True)).to_be_visible()
    expect(answer.locator("details.tool-call summary")).to_have_text(f"Tool call: {TOOL} (denied)")
    expect(chat_status(page)).to_have_text("Done")
    expect(approval(page)).to_have_count(0)
    assert len(plan.requests) == 2
    guard.check()


LONG_TEXT = " ".join(f"word{i}" for i in range(60))


def test_an_answer_going_on_after_an_approval_resumes_after_a_reload(
    console, mcp_url, guard: Guard
):
    token = agent_with_guarded_echo(console, mcp_url, "org_approve_reload")
    console.provider.plan(
        "approve then reload",
        tool_call_script(TOOL, {"text": ECHOED}),
        text_script(LONG_TEXT, pieces=60, pause=0.08),
    )
    page = open_signed_in(guard, console.handoff(token))
    ask(page, "Please approve then reload.", agent="Operator")
    waiting_for_approval(page).get_by_role("button", name="Approve", exact=True).click()
    expect(last_answer(page)).to_contain_text("word5")

    page.reload()
    answer = last_answer(page)
    expect(chat_status(page)).to_have_text("Answering…")
    expect(answer).to_contain_text(LONG_TEXT, timeout=20_000)
    expect(chat_status(page)).to_have_text("Done")
    # The stored start of the message, then the run replayed onto it: each part once.
    expect(answer.locator("details.tool-call summary")).to_have_text(f"Tool call: {TOOL} (done)")
    assert answer.inner_text().count("word59") == 1, answer.inner_text()
    expect(page.get_by_role("log").get_by_role("article", name="Answer")).to_have_count(1)
    guard.check()


def test_a_decision_made_elsewhere_is_reported_and_the_stored_state_shown(
    console, mcp_url, guard: Guard
):
    token = agent_with_guarded_echo(console, mcp_url, "org_elsewhere")
    console.provider.plan(
        "decide elsewhere",
        tool_call_script(TOOL, {"text": ECHOED}),
        text_script("Fine, no echo then."),
    )
    guard.allowed_errors.append("409")
    page = open_signed_in(guard, console.handoff(token))
    ask(page, "Please decide elsewhere.", agent="Operator")
    waiting_for_approval(page)
    # The console reads the conversation once the stream ends: the decision below must come
    # after that read, or the console sees the continuation and the Approve button goes.
    page.wait_for_load_state("networkidle")

    stored = stored_answer(console, token)
    pending = next(
        p for p in stored["messages"][-1]["parts"] if p["type"] == "tool-approval-request"
    )
    with console.api(token) as api:
        denied = api.post(
            f"/chat/{stored['threadId']}/approvals",
            json={"approvalId": pending["approvalId"], "approved": False, "reason": "By API"},
        )
    assert denied.status_code == 200, denied.text

    approval(page).get_by_role("button", name="Approve", exact=True).click()
    expect(page.get_by_role("alert")).to_contain_text(
        "The decision was not recorded: This approval was already answered"
    )
    answer = last_answer(page)
    expect(answer.get_by_text("Denied: By API", exact=True)).to_be_visible()
    expect(answer).to_contain_text("Fine, no echo then.", timeout=20_000)
    expect(approval(page)).to_have_count(0)
    guard.check()


def two_calls_script(name: str, texts: list[str]) -> list[bytes | float]:
    """One step calling `name` once per text (ids call_1, call_2, …), then `tool_calls`."""
    calls = [
        {
            "index": i,
            "id": f"call_{i + 1}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"text": text})},
        }
        for i, text in enumerate(texts)
    ]
    chunk = {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": calls}}]}
    return [sse_head(), f"data: {json.dumps(chunk)}\n\n".encode(), sse_delta(finish="tool_calls")]


def test_while_a_decision_is_sent_the_chat_is_busy_and_the_answer_waits_for_the_last_one(
    console, mcp_url, guard: Guard
):
    token = agent_with_guarded_echo(console, mcp_url, "org_two_calls")
    plan = console.provider.plan(
        "two echoes",
        two_calls_script(TOOL, ["first echo", "second echo"]),
        text_script("Both echoes are done."),
    )
    page = open_signed_in(guard, console.handoff(token))
    ask(page, "Please make two echoes.", agent="Operator")
    requests = approval(page)
    expect(requests).to_have_count(2)
    expect(chat_status(page)).to_have_text("Waiting for approval")
    first, second = requests.nth(0), requests.nth(1)
    expect(first).to_contain_text("first echo")
    expect(second).to_contain_text("second echo")

    # The first decision is held on its way: nothing else can be sent meanwhile.
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route("**/chat/*/approvals", hold)
    page.get_by_label("Message", exact=True).fill("Something else")
    first.get_by_role("button", name="Approve", exact=True).click()
    send = page.get_by_role("button", name="Send", exact=True)
    expect(send).to_be_disabled()
    for button in ("Approve", "Deny"):
        expect(first.get_by_role("button", name=button, exact=True)).to_be_disabled()
        expect(second.get_by_role("button", name=button, exact=True)).to_be_disabled()
    assert len(held) == 1, held
    held[0].continue_()
    page.unroute("**/chat/*/approvals")

    # Another call still waits: the answer does not go on yet.
    expect(requests).to_have_count(1)
    expect(last_answer(page).locator("details.tool-call summary")).to_have_text(
        f"Tool call: {TOOL} (approved)"
    )
    expect(chat_status(page)).to_have_text("Waiting for approval")
    expect(send).to_be_enabled()
    assert len(plan.requests) == 1, "the model was asked again before the last decision"

    approval(page).get_by_role("button", name="Approve", exact=True).click()
    answer = last_answer(page)
    expect(answer).to_contain_text("Both echoes are done.")
    expect(chat_status(page)).to_have_text("Done")
    expect(answer.locator("details.tool-call summary")).to_have_text(
        [f"Tool call: {TOOL} (done)", f"Tool call: {TOOL} (done)"]
    )
    assert len(plan.requests) == 2
    guard.check()


def test_no_serious_accessibility_violation_on_an_approval(console, mcp_url, axe_guard: Guard):
    token = agent_with_guarded_echo(console, mcp_url, "org_approval_axe")
    console.provider.plan("accessible approval", tool_call_script(TOOL, {"text": ECHOED}))
    page = open_signed_in(axe_guard, console.handoff(token))
    ask(page, "Is the accessible approval fine?", agent="Operator")
    request = waiting_for_approval(page)
    found = serious_violations(page, "an approval")
    request.get_by_role("button", name="Deny", exact=True).click()
    expect(request.get_by_label("Reason (optional)")).to_be_focused()
    found += serious_violations(page, "an approval's denial")
    assert not found, "serious accessibility violations:\n" + "\n".join(found)
    axe_guard.check()
