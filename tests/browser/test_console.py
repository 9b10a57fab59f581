"""The console in a browser against a real `serve` whose model is scripted (one `serve` for the
whole module, each test in an organization of its own): signing in, the knowledge pages (upload,
failed uploads, search, download), the chat (a streamed Markdown answer with a tool call and a
citation, unsafe Markdown, stop, resume after a reload, rename and delete, a reached spend cap),
the organization's sidebar settings as a member sees them, and accessibility (axe-core, 360 px
wide). Every page is opened in a context that allows only loopback (tests/browser/support.py)."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.backend import Console, text_script, tool_call_script, wait_for_files
from tests.browser.conftest import LIBRARY_NOTE, LIBRARY_PDF
from tests.browser.support import (
    Guard,
    ask,
    chat_status,
    guarded_context,
    last_answer,
    open_signed_in,
    serious_violations,
)
from tests.integration.extraction_samples import pdf

# --- Signing in ----------------------------------------------------------------------------------


def test_a_hand_off_link_for_someone_else_asks_before_switching(console, guard: Guard):
    page = open_signed_in(guard, console.handoff(console.token("org_ada", "user_ada")))
    facts = page.get_by_test_id("user-facts")
    expect(facts).to_contain_text("user_ada")
    # A link for another identity pasted into the open tab: only the fragment changes.
    other = console.token("org_mallory", "user_mallory")
    page.evaluate("token => { location.hash = 'access_token=' + token }", other)

    prompt = page.get_by_role("dialog", name="Switch to user_mallory of org_mallory?")
    expect(prompt).to_be_visible()
    assert "access_token" not in page.url, page.url
    prompt.get_by_role("button", name="Stay signed in as user_ada").click()
    expect(facts).to_contain_text("user_ada")
    stored = page.evaluate("JSON.stringify(Object.values(sessionStorage))")
    assert other not in stored

    page.evaluate("token => { location.hash = 'access_token=' + token }", other)
    page.get_by_role("dialog").get_by_role("button", name="Switch", exact=True).click()
    expect(facts).to_contain_text("user_mallory")
    assert "access_token" not in page.url, page.url


def test_sign_in_on_the_development_page_lands_on_the_chat(console, guard: Guard):
    page = guard.new_page()
    page.goto(console.url)

    page.get_by_label("User id", exact=True).fill("user_signin")
    page.get_by_label("Organization id", exact=True).fill("org_signin")
    page.get_by_label("Role", exact=True).select_option("member")
    page.get_by_role("button", name="Sign in").click()

    expect(page.get_by_label("Message", exact=True)).to_be_visible()
    # The minted token is kept in session storage (never a cookie) and says what was chosen.
    stored = page.evaluate("() => Object.values(sessionStorage)")
    tokens = [v for v in stored if re.fullmatch(r"[\w-]+\.[\w-]+\.[\w-]+", v)]
    assert len(tokens) == 1, stored
    claims = json.loads(base64.urlsafe_b64decode(tokens[0].split(".")[1] + "=="))
    assert claims["sub"] == "user_signin"
    assert claims["o"]["id"] == "org_signin"
    assert claims["o"]["rol"] == "member"
    assert not page.context.cookies(), "a cookie was set"
    guard.check()


# --- Knowledge -----------------------------------------------------------------------------------

REPORT = pdf(["Quarterly report: the ferry carried more passengers.", "Second page."])
NOTE = b"# Ferry timetable\n\nThe first ferry leaves at seven.\n"


def test_create_a_knowledge_base_and_upload_two_files(console, guard: Guard):
    token = console.token("org_uploads")
    page = open_signed_in(guard, console.handoff(token))
    page.get_by_role("link", name="Knowledge").first.click()
    expect(page.get_by_role("heading", name="Knowledge bases", level=1)).to_be_visible()

    page.get_by_role("button", name="New knowledge base").click()
    page.get_by_label("Name", exact=True).fill("Ferry documents")
    page.get_by_role("button", name="Create", exact=True).click()
    expect(page.get_by_role("dialog")).to_have_count(0)
    with console.api(token) as api:
        listed = api.get("/kb/manage").json()["knowledgeBases"]
    assert [kb["name"] for kb in listed] == ["Ferry documents"]
    page.get_by_role("link", name="Ferry documents").click()
    expect(page.get_by_role("heading", name="Ferry documents", level=1)).to_be_visible()

    # A marker on the window: it survives only if the page is never reloaded.
    page.evaluate("window.__notReloaded = true")
    page.get_by_label("Choose files").set_input_files(
        [
            {"name": "report.pdf", "mimeType": "application/pdf", "buffer": REPORT},
            {"name": "timetable.md", "mimeType": "text/markdown", "buffer": NOTE},
        ]
    )

    for name in ("report.pdf", "timetable.md"):
        bar = page.get_by_role("progressbar", name=name)
        expect(bar).to_be_visible()
        expect(bar).to_have_attribute("value", "100")  # uploaded
    for name in ("report.pdf", "timetable.md"):
        status = page.locator(f'[data-file-name="{name}"] [data-status]')
        expect(status).to_have_attribute("data-status", "completed", timeout=60_000)
    assert page.evaluate("window.__notReloaded === true"), "the page was reloaded"
    with console.api(token) as api:
        files = api.get("/kb/files", params={"kbId": listed[0]["id"]}).json()["files"]
    assert sorted((f["fileName"], f["processingStatus"]) for f in files) == [
        ("report.pdf", "completed"),
        ("timetable.md", "completed"),
    ]
    guard.check()


def open_knowledge_base(page: Page, name: str) -> None:
    """From the chat, the knowledge base called `name`'s page."""
    page.get_by_role("link", name="Knowledge").first.click()
    expect(page.get_by_role("heading", name="Knowledge bases", level=1)).to_be_visible()
    page.get_by_role("link", name=name).first.click()
    expect(page.get_by_role("heading", name=name, level=1)).to_be_visible()


def test_search_opens_a_passages_page_and_download_gives_the_uploaded_bytes(
    console, library, guard: Guard
):
    page = open_signed_in(guard, console.handoff(library.token))
    open_knowledge_base(page, library.kb_name)

    search = page.get_by_role("search")
    search.get_by_label("Search", exact=True).fill("lighthouse keeper")
    search.get_by_role("button", name="Search", exact=True).click()
    found = page.locator(f'[data-result-file="{library.pdf_name}"]').filter(
        has_text="The lighthouse keeper feeds the harbour cat at dawn."
    )
    expect(found).to_have_count(1)
    found.get_by_role(
        "button", name=re.compile(rf"^{re.escape(library.pdf_name)}, page 1$")
    ).click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(library.pdf_name)
    image = dialog.locator("img")
    expect(image).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)

    for name, original in ((library.note_name, LIBRARY_NOTE), (library.pdf_name, LIBRARY_PDF)):
        row = page.locator(f'[data-file-name="{name}"]')
        with page.expect_download() as downloading:
            row.get_by_role("button", name="Download", exact=True).click()
        download = downloading.value
        assert download.suggested_filename == name
        assert download.failure() is None, download.failure()
        assert download.path().read_bytes() == original, f"{name}: not the uploaded bytes"
    guard.check()


BROKEN_PDF = b"%PDF-1.7 broken"


def test_failed_uploads_show_their_reason_on_their_own_rows(console, guard: Guard):
    token = console.token("org_failed_uploads")
    with console.api(token) as api:
        created = api.post("/kb/manage", json={"name": "Damaged papers"})
        assert created.status_code == 201, created.text
        kb_id = created.json()["knowledgeBase"]["id"]
    # The presign refusal (a 400) is logged by the browser as a failed resource load.
    guard.allowed_errors.append("status of 400")
    page = open_signed_in(guard, console.handoff(token))
    open_knowledge_base(page, "Damaged papers")

    page.get_by_label("Choose files").set_input_files(
        [
            {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": BROKEN_PDF},
            # A content type the service refuses at presign (not `type/subtype`): 400.
            {"name": "odd.bin", "mimeType": "not a type", "buffer": b"odd"},
            {"name": "fine.md", "mimeType": "text/markdown", "buffer": NOTE},
        ]
    )

    # Processing refuses the corrupt PDF: its file row says so, with the service's reason.
    broken = page.locator('[data-file-name="broken.pdf"]')
    expect(broken.locator("[data-status]")).to_have_attribute(
        "data-status", "parse_failed", timeout=30_000
    )
    with console.api(token) as api:
        files = {f["fileName"]: f for f in wait_for_files(api, kb_id)}
    assert sorted(files) == ["broken.pdf", "fine.md"], files
    reason = files["broken.pdf"]["processingError"]
    assert reason, files["broken.pdf"]
    expect(broken.locator("[data-processing-error]")).to_have_text(reason)
    expect(page.locator("[data-processing-error]")).to_have_count(1)
    expect(page.locator('[data-file-name="fine.md"] [data-status]')).to_have_attribute(
        "data-status", "completed"
    )

    # The upload list: the refused upload failed with the service's message, on its item only.
    refused = page.locator('[data-upload-name="odd.bin"]')
    expect(refused).to_have_attribute("data-upload-state", "failed")
    expect(refused.locator(".kb-upload-error")).to_contain_text(
        re.compile("MIME|content type", re.I)
    )
    expect(refused.get_by_role("button", name="Retry upload of odd.bin")).to_be_visible()
    expect(page.locator('[data-upload-name="fine.md"]')).to_have_attribute(
        "data-upload-state", "done"
    )
    failed_pdf = page.locator('[data-upload-name="broken.pdf"]')
    expect(failed_pdf).to_have_attribute("data-upload-state", "failed")
    expect(failed_pdf.locator(".kb-upload-error")).to_have_text(reason)
    guard.check()


# --- Chat ----------------------------------------------------------------------------------------

ANSWER = (
    "The lighthouse keeper feeds the harbour cat at dawn.\n\n"
    "```python\nprint('dawn')\n```\n\n"
    "| Who | When |\n|---|---|\n| keeper | dawn |\n\n"
    "Raw <b>x</b> stays text.\n"
)
LONG_TEXT = " ".join(f"word{i}" for i in range(60))


def conversations(api: httpx.Client, agent_id: int) -> list[dict[str, Any]]:
    listed = api.get("/conversations", params={"agentId": agent_id})
    assert listed.status_code == 200, listed.text
    return listed.json()["conversations"]


def only_thread(api: httpx.Client, agent_id: int) -> str:
    deadline = time.monotonic() + 10
    while not (found := conversations(api, agent_id)):
        assert time.monotonic() < deadline, "the conversation was never created"
        time.sleep(0.2)
    assert len(found) == 1, found
    return str(found[0]["threadId"])


def stream_status(api: httpx.Client, thread_id: str) -> str:
    got = api.get("/getConversation", params={"threadId": thread_id})
    assert got.status_code == 200, got.text
    return str(got.json()["streamStatus"])


def wait_for_status(api: httpx.Client, thread_id: str, wanted: str, within: float) -> None:
    deadline = time.monotonic() + within
    while (status := stream_status(api, thread_id)) != wanted:
        assert time.monotonic() < deadline, f"streamStatus stayed {status!r}, not {wanted!r}"
        time.sleep(0.2)


def eventually(condition: Any, message: str, within: float = 5) -> None:
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.1)


def new_agent(console: Console, org: str, name: str) -> tuple[str, int]:
    token = console.token(org)
    with console.api(token) as api:
        created = api.post("/agents", json={"name": name})
    assert created.status_code == 201, created.text
    return token, int(created.json()["agent"]["id"])


def answer_lengths_while_answering(page: Page) -> list[int]:
    """The last answer's text length, sampled while the Stop button shows."""
    stop = page.get_by_role("button", name="Stop", exact=True)
    expect(stop).to_be_visible()
    lengths = []
    deadline = time.monotonic() + 30
    while stop.is_visible() and time.monotonic() < deadline:
        lengths.append(len(last_answer(page).inner_text()))
        time.sleep(0.05)
    return lengths


def test_a_streamed_markdown_answer_with_a_citation_that_opens_the_page(
    console, library, guard: Guard
):
    plan = console.provider.plan(
        "lighthouse",
        tool_call_script("search_knowledge_base", {"query": "lighthouse keeper cat"}),
        text_script(ANSWER, pieces=25, pause=0.1),
    )
    page = open_signed_in(guard, console.handoff(library.token))

    ask(page, "Who feeds the lighthouse cat?", agent=library.agent_name)

    expect(chat_status(page)).to_have_text("Answering…")
    lengths = answer_lengths_while_answering(page)
    # Markdown re-renders as it arrives (a table row is text, then a cell), so the length may
    # dip; but it must have been seen at several sizes, growing overall.
    assert len(set(lengths)) >= 3 and lengths[-1] > lengths[0], f"not streamed: {lengths}"
    expect(chat_status(page)).to_have_text("Done", timeout=20_000)
    assert len(plan.requests) == 2  # the tool call, then the answer with its result

    answer = last_answer(page)
    # The tool call is shown, closed, with its input (the query) and output (the passages).
    tool_call = answer.locator("details").filter(has_text="Tool call: search_knowledge_base")
    expect(tool_call).to_have_count(1)
    summary = tool_call.locator("summary")
    expect(summary).to_have_text("Tool call: search_knowledge_base (done)")
    expect(tool_call.get_by_text("The lighthouse keeper feeds")).to_be_hidden()
    summary.click()
    expect(tool_call).to_have_attribute("open", "")
    shown = tool_call.locator("pre")
    expect(shown.first).to_contain_text("lighthouse keeper cat")
    expect(shown.nth(1)).to_contain_text("The lighthouse keeper feeds the harbour cat at dawn.")
    expect(answer.locator("table")).to_contain_text("keeper")
    expect(answer.locator("pre code")).to_contain_text("print('dawn')")
    expect(answer).to_contain_text("Raw <b>x</b> stays text.")
    assert answer.locator("b").count() == 0, "raw HTML in the answer was rendered"

    answer.get_by_role("button", name=re.compile(r"^guide\.pdf, page 1")).click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("guide.pdf")
    image = dialog.locator("img")
    expect(image).to_have_attribute("src", re.compile(r"^blob:"))
    page.wait_for_function(
        "img => img.complete && img.naturalWidth > 0", arg=image.element_handle()
    )
    guard.check()


UNSAFE_MARKDOWN = (
    "Links: [click](javascript:alert(1)) and [shout](JavaScript:alert(2)).\n\n"
    "![x](https://example.invalid/t.png)\n"
)


def test_an_answers_markdown_runs_no_script_and_loads_no_image(console, guard: Guard):
    token, _ = new_agent(console, "org_unsafe_markdown", "Prankster")
    console.provider.plan("unsafe links", text_script(UNSAFE_MARKDOWN))
    page = open_signed_in(guard, console.handoff(token))

    ask(page, "Show me unsafe links.", agent="Prankster")
    expect(chat_status(page)).to_have_text("Done", timeout=20_000)

    answer = last_answer(page)
    expect(answer).to_contain_text("click")
    expect(answer).to_contain_text("shout")
    hrefs = answer.evaluate(
        "el => [...el.querySelectorAll('[href]')].map(e => e.getAttribute('href'))"
    )
    scripted = [h for h in hrefs if re.match(r"\s*javascript:", h, re.I)]
    assert not scripted, f"javascript: addresses in the answer: {scripted}"
    expect(answer.locator("img")).to_have_count(0)
    # The image is at most a link to its address (never fetched: the guard fails on a request
    # off loopback), opened without the opener.
    for link in answer.locator("a[href]").all():
        expect(link).to_have_attribute("target", "_blank")
        expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))
        expect(link).to_have_attribute("rel", re.compile(r"\bnoreferrer\b"))
    guard.check()


def test_stop_cancels_the_answer_on_the_service(console, guard: Guard):
    token, agent_id = new_agent(console, "org_stop", "Storyteller")
    plan = console.provider.plan("endless story", text_script(LONG_TEXT * 4, pieces=240, pause=0.1))
    page = open_signed_in(guard, console.handoff(token))

    ask(page, "Tell me an endless story.", agent="Storyteller")
    expect(last_answer(page)).to_contain_text("word3")
    page.get_by_role("button", name="Stop", exact=True).click()

    expect(chat_status(page)).to_have_text("Stopped")
    with console.api(token) as api:
        wait_for_status(api, only_thread(api, agent_id), "cancelled", within=5)
    eventually(lambda: plan.hung_up, "the service kept asking the model after the stop")
    expect(page.get_by_role("button", name="Send", exact=True)).to_be_visible()
    guard.check()


def test_an_answer_resumes_after_a_reload(console, guard: Guard):
    token, agent_id = new_agent(console, "org_reload", "Narrator")
    console.provider.plan("slow tale", text_script(LONG_TEXT, pieces=100, pause=0.08))
    page = open_signed_in(guard, console.handoff(token))

    ask(page, "Tell me a slow tale.", agent="Narrator")
    expect(last_answer(page)).to_contain_text("word5")
    with console.api(token) as api:
        thread_id = only_thread(api, agent_id)
    page.reload()

    assert thread_id in page.url, f"the reloaded page is not the conversation: {page.url}"
    expect(page.get_by_role("log")).to_contain_text("Tell me a slow tale.")
    answer = last_answer(page)
    expect(answer).to_contain_text("word", timeout=10_000)
    after_reload = len(answer.inner_text())
    assert after_reload < len(LONG_TEXT), "the answer had ended before the reload was shown"
    expect(answer).to_contain_text(LONG_TEXT, timeout=20_000)
    expect(chat_status(page)).to_have_text("Done")
    # One question, one answer: the resumed stream did not add a second copy of the answer.
    log = page.get_by_role("log")
    expect(log.get_by_role("article", name="You said")).to_have_count(1)
    expect(log.get_by_role("article", name="Answer")).to_have_count(1)
    with console.api(token) as api:
        assert stream_status(api, thread_id) == "completed"
        stored = api.get("/getConversation", params={"threadId": thread_id}).json()["messages"]
    assert [m["role"] for m in stored] == ["user", "assistant"], stored
    guard.check()


def test_rename_and_delete_a_conversation(console, guard: Guard):
    token, agent_id = new_agent(console, "org_rename", "Clerk")
    with console.api(token) as api:
        started = api.post(
            "/chat",
            json={
                "agentId": agent_id,
                "messages": [{"role": "user", "parts": [{"type": "text", "text": "Hello"}]}],
            },
            headers={"X-Stream-Response": "false"},
        )
        assert started.status_code == 202, started.text
        thread_id = started.json()["threadId"]
        wait_for_status(api, thread_id, "completed", within=15)
    page = open_signed_in(guard, console.handoff(token))

    conversation = page.get_by_role("link", name=re.compile("Scripted title|Hello"))
    expect(conversation).to_be_visible()
    page.get_by_role("button", name=re.compile("Rename")).first.click()
    page.get_by_label("Title").fill("Harbour questions")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("link", name="Harbour questions")).to_be_visible()
    with console.api(token) as api:
        got = api.get("/getConversation", params={"threadId": thread_id})
        assert got.json()["title"] == "Harbour questions"

    page.get_by_role("button", name=re.compile("Delete")).first.click()
    confirm = page.get_by_role("dialog", name="Delete conversation")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("Harbour questions")
    confirm.get_by_role("button", name="Delete", exact=True).click()
    expect(confirm).to_have_count(0)
    expect(page.get_by_role("link", name="Harbour questions")).to_have_count(0)
    with console.api(token) as api:
        gone = api.get("/getConversation", params={"threadId": thread_id})
        assert gone.status_code == 404, gone.text
    guard.check()


def test_a_reached_spend_cap_is_shown_plainly(console, guard: Guard):
    token, _ = new_agent(console, "org_capped", "Accountant")
    with console.api(token) as api:
        settings = api.get("/orgSettings").json()["settings"]
        put = api.put("/orgSettings", json={"settings": {**settings, "spendCaps": {"daily": 0}}})
        assert put.status_code == 200, put.text
        assert put.json()["spendCapStatus"]["daily"]["exceeded"] is True
    guard.allowed_errors.append("402")
    page = open_signed_in(guard, console.handoff(token))

    ask(page, "How much have we spent?", agent="Accountant")

    expect(page.get_by_text("Spend cap reached")).to_be_visible()
    expect(chat_status(page)).not_to_have_text("Answering…")
    guard.check()


# --- Sidebar and settings ------------------------------------------------------------------------

FEEDBACK_HTML = (
    '<p>Tell us</p><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
)
WIKI = "https://wiki.example.invalid/harbour"


def test_a_member_sees_the_organizations_sidebar_settings(console, guard: Guard):
    org = "org_layout"
    admin = console.token(org)
    with console.api(admin) as api:
        ids = {}
        for name in ("Alpha", "Bravo", "Charlie"):
            created = api.post("/agents", json={"name": name})
            assert created.status_code == 201, created.text
            ids[name] = created.json()["agent"]["id"]
        settings = api.get("/orgSettings").json()["settings"]
        layout = {
            **settings,
            "sidebarPinnedAppIds": [ids["Bravo"]],
            "defaultAgentId": ids["Charlie"],
            "sidebarLinks": [
                {"label": "Harbour wiki", "url": WIKI},
                {"label": "Prank", "url": "javascript:alert(1)"},
            ],
            "feedbackModal": {"customHtml": FEEDBACK_HTML},
        }
        refused = api.put("/orgSettings", json={"settings": layout})
        assert refused.status_code == 400, refused.text
        assert any("sidebarLinks" in d["field"] for d in refused.json()["details"]), refused.text
        layout["sidebarLinks"] = layout["sidebarLinks"][:1]
        put = api.put("/orgSettings", json={"settings": layout})
        assert put.status_code == 200, put.text
        stored = put.json()["settings"]["feedbackModal"]["customHtml"]
    assert "Tell us" in stored, stored
    assert not re.search(r"<script|onerror|__pwned", stored, re.I), f"not sanitized: {stored}"

    member = console.token(org, user="u_member", role="member")
    page = open_signed_in(guard, console.handoff(member))
    sidebar = page.get_by_role("navigation", name="Console")

    # The pinned agent leads the sidebar's agents, marked pinned; the others are not.
    agents = sidebar.locator("section").filter(
        has=page.get_by_role("heading", name="Agents", exact=True)
    )
    listed = agents.get_by_role("link")
    expect(listed).to_have_count(3)
    expect(listed.first).to_have_text("Bravo (pinned)")
    expect(agents.get_by_text("(pinned)")).to_have_count(1)

    # The default agent leads the picker and is the one chosen.
    picker = page.get_by_label("Agent", exact=True)
    expect(picker).to_have_value(str(ids["Charlie"]))
    expect(picker.locator("option").first).to_have_text("Charlie")

    link = sidebar.get_by_role("link", name="Harbour wiki")
    expect(link).to_have_attribute("href", WIKI)
    expect(link).to_have_attribute("target", "_blank")
    expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))
    expect(link).to_have_attribute("rel", re.compile(r"\bnoreferrer\b"))

    # The feedback HTML is shown in a sandboxed frame that runs no script.
    sidebar.get_by_role("button", name="Feedback", exact=True).click()
    dialog = page.get_by_role("dialog", name="Feedback")
    expect(dialog).to_be_visible()
    frame_element = dialog.locator("iframe")
    expect(frame_element).to_have_attribute("sandbox", "")
    expect(page.frame_locator("[role=dialog] iframe").get_by_text("Tell us")).to_be_visible()
    frame = frame_element.element_handle().content_frame()
    assert frame is not None
    assert frame.evaluate("typeof window.__pwned") == "undefined", "a script ran in the frame"
    assert frame.locator("script").count() == 0
    assert page.evaluate("typeof window.__pwned") == "undefined", "a script ran in the page"
    guard.check()


# --- Accessibility -------------------------------------------------------------------------------


def test_no_serious_accessibility_violation_on_the_consoles_pages(console, library, axe_guard):
    found: list[str] = []
    sign_in = axe_guard.new_page()
    sign_in.goto(console.url)
    expect(sign_in.get_by_role("button", name="Sign in")).to_be_visible()
    found += serious_violations(sign_in, "sign-in")
    sign_in.close()

    console.provider.plan("accessible", text_script("**Nine** o'clock.\n\n- one\n- two\n"))
    page = open_signed_in(axe_guard, console.handoff(library.token))
    ask(page, "When is it accessible?", agent=library.agent_name)
    expect(chat_status(page)).to_have_text("Done", timeout=20_000)
    found += serious_violations(page, "chat with an answer")

    page.get_by_role("link", name="Knowledge").first.click()
    expect(page.get_by_role("heading", name="Knowledge bases", level=1)).to_be_visible()
    expect(page.get_by_text(library.kb_name).first).to_be_visible()
    found += serious_violations(page, "knowledge bases")

    page.get_by_role("link", name=library.kb_name).first.click()
    row = page.locator(f'[data-file-name="{library.pdf_name}"]')
    expect(row.locator("[data-status]")).to_have_attribute("data-status", "completed")
    found += serious_violations(page, "a knowledge base's files")

    row.get_by_role("button", name=re.compile("View pages")).click()
    dialog = page.get_by_role("dialog")
    expect(dialog.locator("img")).to_have_attribute("src", re.compile(r"^blob:"))
    found += serious_violations(page, "the file preview dialog")

    assert not found, "serious accessibility violations:\n" + "\n".join(found)
    axe_guard.check()


@pytest.fixture
def narrow(browser: Browser) -> Iterator[Guard]:
    """A context 360 px wide, closed after the report (so a failure's screenshot shows it)."""
    watched = guarded_context(browser, viewport={"width": 360, "height": 740})
    yield watched
    watched.context.close()


def test_the_chat_works_at_360_pixels_wide(console, library, narrow: Guard):
    console.provider.plan("narrow", text_script("Small screens work."))
    page = open_signed_in(narrow, console.handoff(library.token))
    message = page.get_by_label("Message", exact=True)
    send = page.get_by_role("button", name="Send", exact=True)
    menu = page.get_by_role("button", name="Menu", exact=True)
    for control in (message, send, menu):
        expect(control).to_be_visible()
        expect(control).to_be_in_viewport()

    knowledge = page.get_by_role("link", name="Knowledge", exact=True)
    expect(knowledge).to_be_hidden()
    menu.click()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(knowledge).to_be_visible()
    expect(knowledge).to_be_in_viewport()
    page.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(knowledge).to_be_hidden()

    ask(page, "Does it work when narrow?", agent=library.agent_name)
    expect(page.get_by_role("log")).to_contain_text("Small screens work.", timeout=20_000)
    expect(chat_status(page)).to_have_text("Done")
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 360, f"the page scrolls sideways: {width} px wide"
    narrow.check()
