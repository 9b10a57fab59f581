"""The console in a real Chromium: its first load's size, compressed, and the time from the chat
stream's first token reaching the page to that token on screen, against a bare reader.

    .venv/bin/python bench/console.py [--rounds 3] [--requests 15] [--tokens 60]

Targets (issue 32): the first load (HTML + JS + CSS as sent, gzip) under 300 KB; the first token
rendered within 50 ms of the stream's first token byte (median). Needs the built console
(`make install`) and Debian's chromium (`make test` installs it; AP_CHROMIUM names another).
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import harness
from harness import fmt, median, percentile

SECTION_TITLE = "Console: first load size, first token on screen"
MODEL = "scripted"
PROMPT = "Tell me about streaming."
FIRST_TOKEN = "w0"
LOAD_TARGET_BYTES = 300_000
RENDER_TARGET_MS = 50.0
CHROMIUM = os.environ.get("AP_CHROMIUM", "/usr/bin/chromium")
# As the browser tests start it: no background traffic to hosts this machine cannot reach.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]  # fmt: skip

# Runs before the console's own scripts (the DevTools protocol, so the console's CSP does not
# apply): `fetch` keeps answering the console, but a tee of each `POST /chat` body notes when
# the first `text-delta` chunk reaches the page; a MutationObserver notes when text holding the
# first token lands in the document, and the frame after it.
PROBE = """
(() => {
  const marks = (window.__bench = { delta: null, dom: null, frame: null, armed: false });
  const original = window.fetch;
  window.fetch = async function (input, init) {
    const response = await original.call(this, input, init);
    const url = new URL(typeof input === "string" ? input : input.url, location.href);
    const method = (init && init.method) || (typeof input === "string" ? "GET" : input.method);
    if (url.pathname !== "/chat" || method.toUpperCase() !== "POST" || !response.body) {
      return response;
    }
    const [forPage, forProbe] = response.body.tee();
    (async () => {
      const reader = forProbe.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        const text = decoder.decode(value, { stream: true });
        if (marks.delta === null && text.includes('"text-delta"')) marks.delta = performance.now();
      }
    })();
    return new Response(forPage, {
      status: response.status, statusText: response.statusText, headers: response.headers,
    });
  };
  const holds = (node) => (node.textContent || "").includes("__TOKEN__");
  new MutationObserver((records) => {
    if (!marks.armed || marks.dom !== null) return;
    for (const record of records) {
      const nodes = record.type === "characterData" ? [record.target] : [...record.addedNodes];
      if (nodes.some(holds)) {
        marks.dom = performance.now();
        requestAnimationFrame(() => { marks.frame = performance.now(); });
        return;
      }
    }
  }).observe(document, { subtree: true, childList: true, characterData: true });
})();
""".replace("__TOKEN__", FIRST_TOKEN)

# The floor: the same request read by a bare loop that appends each delta to a <div>, in the same
# page, timed the same way (first text-delta chunk read -> text in the document -> next frame).
BARE = """
async ({ token, agentId }) => {
  const out = document.createElement("div");
  document.body.append(out);
  let delta = null, dom = null, frame = null;
  const observer = new MutationObserver(() => {
    if (dom === null && out.textContent.includes("__TOKEN__")) {
      dom = performance.now();
      requestAnimationFrame(() => { frame = performance.now(); });
    }
  });
  observer.observe(out, { subtree: true, childList: true, characterData: true });
  const response = await fetch("/chat", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${token}` },
    body: JSON.stringify({
      agentId, title: "Bare reader",
      messages: [{ role: "user", parts: [{ type: "text", text: "__PROMPT__" }] }],
    }),
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    const text = decoder.decode(value, { stream: true });
    if (delta === null && text.includes('"text-delta"')) delta = performance.now();
    buffer += text;
    const events = buffer.split("\\n\\n");
    buffer = events.pop();
    for (const event of events) {
      const data = event.replace(/^data: /, "");
      if (data.startsWith("{")) {
        const chunk = JSON.parse(data);
        if (chunk.type === "text-delta") out.append(chunk.delta);
      }
    }
  }
  await new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)));
  observer.disconnect();
  out.remove();
  return { delta, dom, frame };
}
""".replace("__TOKEN__", FIRST_TOKEN).replace("__PROMPT__", PROMPT)

# What a first load's resources are: the console's own files, not the API calls it makes.
LOAD_ENTRIES = """
() => {
  const own = (entry) => {
    const path = new URL(entry.name).pathname;
    return path.startsWith("/console/") && !path.endsWith(".json");
  };
  const entries = [...performance.getEntriesByType("navigation"),
                   ...performance.getEntriesByType("resource")].filter(own);
  return entries.map((e) => ({ name: new URL(e.name).pathname, transfer: e.transferSize,
                               encoded: e.encodedBodySize, decoded: e.decodedBodySize }));
}
"""


@dataclass
class Load:
    transfer: int
    encoded: int
    decoded: int
    files: int


@dataclass
class Timing:
    dom_ms: float
    frame_ms: float


def first_load(browser: Any, url: str) -> Load:
    """The console opened in a fresh context (empty cache), once its chat page is usable."""
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.get_by_label("Message").wait_for()
        page.wait_for_load_state("networkidle")
        entries = page.evaluate(LOAD_ENTRIES)
    finally:
        context.close()
    return Load(
        transfer=sum(e["transfer"] for e in entries),
        encoded=sum(e["encoded"] for e in entries),
        decoded=sum(e["decoded"] for e in entries),
        files=len(entries),
    )


def console_answer(page: Any, url: str, agent_name: str) -> Timing:
    """One question in a new chat of the console; the probe's marks once it is done."""
    page.goto(url)
    page.get_by_label("Agent").select_option(label=agent_name)
    page.get_by_label("Message").fill(PROMPT)
    page.evaluate("() => { window.__bench.armed = true; }")
    page.get_by_role("button", name="Send").click()
    page.get_by_role("status").filter(has_text="Done").wait_for(timeout=60_000)
    marks = page.evaluate("() => window.__bench")
    return timing(marks)


def bare_answer(page: Any, token: str, agent_id: int) -> Timing:
    return timing(page.evaluate(BARE, {"token": token, "agentId": agent_id}))


def timing(marks: dict[str, Any]) -> Timing:
    if marks.get("delta") is None or marks.get("dom") is None or marks.get("frame") is None:
        raise harness.BenchError(f"a mark is missing: {marks}")
    return Timing(dom_ms=marks["dom"] - marks["delta"], frame_ms=marks["frame"] - marks["delta"])


def whole_build() -> tuple[int, int, int]:
    """Every file of the build (all pages, loaded or not): count, bytes gzipped, bytes."""
    dist = harness.ROOT / "console" / "dist"
    files = [p for p in dist.rglob("*") if p.is_file() and p.suffix in {".html", ".js", ".css"}]
    data = [p.read_bytes() for p in files]
    return len(files), sum(len(gzip.compress(d)) for d in data), sum(len(d) for d in data)


def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    from playwright.sync_api import sync_playwright

    if not (harness.ROOT / "console" / "dist" / "index.html").exists():
        raise harness.BenchError("the console is not built: make install builds it")
    if not Path(CHROMIUM).exists():
        raise harness.BenchError(f"no Chromium at {CHROMIUM}: make test installs Debian's")
    loads: list[Load] = []
    console: list[list[Timing]] = []
    bare: list[list[Timing]] = []
    with harness.Rig("ap-bench-console-") as rig, sync_playwright() as playwright:
        provider = rig.provider(args.tokens, delay=args.delay)
        platform = rig.serve(harness.scripted_env(provider.url, MODEL, args.log_level))
        token = platform.token("u0", "admin")
        agent_name = "Console bench"
        agent_id = platform.create_agent(token, {"name": agent_name, "model": f"openai:{MODEL}"})
        url = f"{platform.url}/console/#access_token={token}"
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        chromium = browser.version
        try:
            first_load(browser, url)  # warm-up: the server's compressed copies, the JIT
            context = browser.new_context()
            context.add_init_script(PROBE)
            page = context.new_page()
            for _ in range(args.warmup):
                console_answer(page, url, agent_name)
                bare_answer(page, token, agent_id)
            for i in range(args.rounds):
                loads.append(first_load(browser, url))
                sides: dict[str, list[Timing]] = {"console": [], "bare": []}
                for j in range(args.requests):
                    # Who goes first alternates, so neither always finds the machine warmer.
                    for side in harness.alternate(("console", "bare"), i + j):
                        if side == "console":
                            sides[side].append(console_answer(page, url, agent_name))
                        else:
                            sides[side].append(bare_answer(page, token, agent_id))
                console.append(sides["console"])
                bare.append(sides["bare"])
        finally:
            browser.close()
    return report(args, info, loads, console, bare, chromium, whole_build())


def report(
    args: argparse.Namespace,
    info: dict[str, str],
    loads: list[Load],
    console: list[list[Timing]],
    bare: list[list[Timing]],
    chromium: str,
    whole: tuple[int, int, int],
) -> tuple[str, bool]:
    def p50(rounds: list[list[Timing]], attr: str) -> list[float]:
        return [median(getattr(t, attr) for t in each) for each in rounds]

    def p90(rounds: list[list[Timing]], attr: str) -> list[float]:
        return [percentile([getattr(t, attr) for t in each], 90) for each in rounds]

    transfer = median(x.transfer for x in loads)
    console_frame = median(p50(console, "frame_ms"))
    load_ok = transfer < LOAD_TARGET_BYTES
    render_ok = console_frame <= RENDER_TARGET_MS
    load = loads[-1]
    rows = []
    for label, rounds in (("console", console), ("bare reader (floor)", bare)):
        rows.append(
            f"| {label} | {median(p50(rounds, 'dom_ms')):.2f} | {median(p90(rounds, 'dom_ms')):.2f}"
            f" | {median(p50(rounds, 'frame_ms')):.2f} | {median(p90(rounds, 'frame_ms')):.2f}"
            f" | {fmt(p50(rounds, 'frame_ms'))} |"
        )
    added = median(p50(console, "frame_ms")) - median(p50(bare, "frame_ms"))
    lines = [
        *harness.heading(SECTION_TITLE, "console.py"),
        f"- Machine: {harness.machine_line(info)}. Headless Chromium {chromium} (Debian's "
        "package, driven by Playwright for Python), the platform, its PostgreSQL and the scripted "
        "provider share these CPUs.",
        f"- Code: {harness.code_state()}.",
        f"- Platform: `agent-platform serve` on a temporary data dir, chats answered by "
        f"`bench/scripted_provider.py` ({args.tokens} deltas, {args.delay * 1000:g} ms apart).",
        f"- First load: the console opened with the hand-off link in a fresh browser context "
        f"(empty cache) until the chat page is usable and the network idle; the sizes of its own "
        f"files (`/console/` and what it loads: HTML, JS, CSS; not the API's JSON) from the "
        f"Performance API, once per round ({args.rounds} rounds), median. Transfer = bytes on "
        f"the wire with headers (gzip); decoded = after decompression.",
        "",
        "| First load | files | transfer (gzip) | encoded bodies | decoded | target |",
        "|---|---:|---:|---:|---:|---|",
        f"| `/console/` | {load.files} | {transfer / 1000:.1f} KB | "
        f"{median(x.encoded for x in loads) / 1000:.1f} KB | "
        f"{median(x.decoded for x in loads) / 1000:.1f} KB | < {LOAD_TARGET_BYTES // 1000} KB: "
        f"{harness.verdict(load_ok)} |",
        f"| every page's files (`console/dist`, Python's gzip level 9) | {whole[0]} | "
        f"{whole[1] / 1000:.1f} KB | | {whole[2] / 1000:.1f} KB | |",
        "",
        f"- First token: {args.requests} questions a round, each in a new chat of the console "
        "(the page opened afresh), alternating one by one with the same request made by a bare "
        "reader in the same page (fetch, read the stream, append each delta to a `<div>`); who "
        "goes first alternates. Measured from the moment the first `text-delta` chunk of the "
        "response reaches the page (a tee of the response body, made by a script the browser "
        "runs before the console's) to the first token in the document (a MutationObserver) "
        "and to the frame after it (`requestAnimationFrame`). p50/p90 per round, medians over "
        f"the rounds; target: the frame within {RENDER_TARGET_MS:g} ms (p50).",
        "",
        "| First token | to DOM p50 (ms) | to DOM p90 | to frame p50 | to frame p90 "
        "| frame p50 per round |",
        "|---|---:|---:|---:|---:|---|",
        *rows,
        "",
        f"Added by the console over the bare reader (to frame, p50): {added:.2f} ms. First token "
        f"on screen within {RENDER_TARGET_MS:g} ms: {harness.verdict(render_ok)}.",
        "",
    ]
    return "\n".join(lines), load_ok and render_ok


def main() -> int:
    parser = harness.parser(__doc__, provider=True, rounds=3, requests=15, warmup=3)
    parser.add_argument("--delay", type=float, default=0.02, help="seconds between deltas")
    parser.set_defaults(tokens=60, log_level="warning")
    return harness.run(SECTION_TITLE, parser.parse_args(), run)


if __name__ == "__main__":
    sys.exit(main())
