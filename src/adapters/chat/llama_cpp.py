"""`ChatModel` for the bundled SmolLM2, run in process by llama-cpp-python.

One `Llama` per process, loaded on the first call. Generation runs on one dedicated thread and
its tokens are handed to the event loop as they come; calls take turns (one generation at a
time, the others wait without holding a thread). A prompt longer than the context loses its
oldest turns first, keeping the system turn and the member's last message, which are cut at
the end as a last resort; room is always left for the answer. Closing the event iterator stops
the generation at the next token.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from adapters.llm.bundled import BundledModelMissing, bundled_smollm2_path
from application.ports.chat_model import (
    ChatEvent,
    ChatModelError,
    ChatModelInfo,
    ChatRequest,
    ChatTurn,
    Finished,
    TextDelta,
    Usage,
)

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_TOKENS = 4096
# Tokens of the chat template around one message (`<|im_start|>role\n ... <|im_end|>\n`).
MESSAGE_OVERHEAD = 6
FAILED = "The local model failed to answer."

_Item = ChatEvent | ChatModelError | None


class _Generation:
    """One call's hand-off between the generating thread and the event loop."""

    __slots__ = ("loop", "queue", "stopped")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[_Item] = asyncio.Queue()
        # Read by the thread between tokens; a plain attribute is the cheapest check there is.
        self.stopped = False

    def post(self, item: _Item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:
            # The loop is closed: nobody is listening any more.
            self.stopped = True


class LlamaCppChatModel:
    """A GGUF chat model in this process. `model_path` defaults to the bundled SmolLM2;
    `n_ctx` 0 takes the model's own context length."""

    def __init__(
        self,
        model_path: Callable[[], Path] = bundled_smollm2_path,
        *,
        threads: int = 2,
        n_ctx: int = DEFAULT_CONTEXT_TOKENS,
    ) -> None:
        self._model_path = model_path
        self._threads = threads
        self._n_ctx = n_ctx
        self._llama: Any = None
        self._formatter: Any = None
        # Everything that touches the model runs on this one thread, so calls queue up in order
        # and a call waiting its turn holds no thread; the lock guards the model all the same.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="llama-cpp")
        self._lock = threading.Lock()
        self._info = ChatModelInfo(
            supports_tools=False, context_tokens=n_ctx or DEFAULT_CONTEXT_TOKENS
        )

    @property
    def info(self) -> ChatModelInfo:
        return self._info

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        return self._events(request)

    async def _events(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        loop = asyncio.get_running_loop()
        generation = _Generation(loop)
        loop.run_in_executor(self._executor, self._generate, request, generation)
        try:
            while True:
                item = await generation.queue.get()
                if item is None:
                    return
                if isinstance(item, ChatModelError):
                    raise item
                yield item
        finally:
            generation.stopped = True

    def _generate(self, request: ChatRequest, generation: _Generation) -> None:
        try:
            if generation.stopped:
                return
            with self._lock:
                self._run(request, generation)
        except ChatModelError as failure:
            generation.post(failure)
        except Exception:
            log.exception("the local chat model failed")
            generation.post(ChatModelError(FAILED))
        finally:
            generation.post(None)

    def _run(self, request: ChatRequest, generation: _Generation) -> None:
        llama = self._load()
        n_ctx = llama.n_ctx()
        reserve = max(1, min(request.max_output_tokens, n_ctx // 2))
        messages, prompt_tokens = self._fit([_message(t) for t in request.turns], n_ctx - reserve)
        max_tokens = max(1, min(request.max_output_tokens, n_ctx - prompt_tokens))
        options: dict[str, Any] = {}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        chunks = llama.create_chat_completion(
            messages=messages, stream=True, max_tokens=max_tokens, **options
        )
        post = generation.post
        pieces: list[str] = []
        reason = "stop"
        try:
            for chunk in chunks:
                if generation.stopped:
                    return
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    pieces.append(text)
                    post(TextDelta(text))
                if choice["finish_reason"] is not None:
                    reason = choice["finish_reason"]
        finally:
            chunks.close()
        if reason == "length":
            completion_tokens = max_tokens
        else:
            completion_tokens = len(self._tokens("".join(pieces), add_bos=False))
        post(Usage(input_tokens=prompt_tokens, output_tokens=completion_tokens))
        post(Finished("length" if reason == "length" else "stop"))

    def _load(self) -> Any:
        if self._llama is None:
            from llama_cpp import Llama
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            try:
                path = self._model_path()
            except BundledModelMissing as missing:
                raise ChatModelError(str(missing)) from None
            llama = Llama(
                model_path=str(path),
                n_ctx=self._n_ctx,
                n_threads=self._threads,
                n_threads_batch=self._threads,
                verbose=False,
            )
            template = llama.metadata.get("tokenizer.chat_template")
            if template and llama.chat_format == "chat_template.default":
                # The same formatter llama-cpp-python builds for this template, to count the
                # prompt's tokens exactly as the model will see them.
                self._formatter = Jinja2ChatFormatter(
                    template=template,
                    eos_token=_token_text(llama, llama.token_eos()),
                    bos_token=_token_text(llama, llama.token_bos()),
                )
            self._llama = llama
        return self._llama

    def _tokens(self, text: str, *, add_bos: bool, special: bool = False) -> list[int]:
        tokens: list[int] = self._llama.tokenize(
            text.encode("utf-8"), add_bos=add_bos, special=special
        )
        return tokens

    def _count(self, messages: list[dict[str, str]]) -> int:
        if self._formatter is None:
            return sum(self._estimate(m) for m in messages) + MESSAGE_OVERHEAD
        formatted = self._formatter(messages=messages)
        return len(
            self._tokens(formatted.prompt, add_bos=not formatted.added_special, special=True)
        )

    def _estimate(self, message: dict[str, str]) -> int:
        return len(self._tokens(message["content"], add_bos=False)) + MESSAGE_OVERHEAD

    def _fit(self, messages: list[dict[str, str]], budget: int) -> tuple[list[dict[str, str]], int]:
        """The messages that fit in `budget` tokens, and their token count."""
        total = self._count(messages)
        if total <= budget:
            return messages, total
        last_user = max(
            (i for i, m in enumerate(messages) if m["role"] == "user"), default=len(messages) - 1
        )
        droppable = [i for i, m in enumerate(messages[:last_user]) if m["role"] != "system"]
        # Drop the oldest turns by their estimated size first, then check the real count.
        excess = total - budget
        dropped: set[int] = set()
        for index in droppable:
            if excess <= 0:
                break
            dropped.add(index)
            excess -= self._estimate(messages[index])
        kept = [m for i, m in enumerate(messages) if i not in dropped]
        total = self._count(kept)
        remaining = [i for i in droppable if i not in dropped]
        while total > budget and remaining:
            dropped.add(remaining.pop(0))
            kept = [m for i, m in enumerate(messages) if i not in dropped]
            total = self._count(kept)
        for _ in range(4):
            if total <= budget:
                break
            kept = self._truncated(kept, total - budget)
            total = self._count(kept)
        if total > budget:
            raise ChatModelError("The conversation is too long for the local model.")
        return kept, total

    def _truncated(self, messages: list[dict[str, str]], excess: int) -> list[dict[str, str]]:
        """The messages with the longest one cut at its end by `excess` tokens and a margin."""
        sizes = [len(self._tokens(m["content"], add_bos=False)) for m in messages]
        longest = max(range(len(messages)), key=sizes.__getitem__)
        keep = max(0, sizes[longest] - excess - MESSAGE_OVERHEAD)
        tokens = self._tokens(messages[longest]["content"], add_bos=False)[:keep]
        content = self._llama.detokenize(tokens).decode("utf-8", "ignore")
        shortened = {**messages[longest], "content": content}
        return [shortened if i == longest else m for i, m in enumerate(messages)]


def _message(turn: ChatTurn) -> dict[str, str]:
    # The bundled model takes no tools: a call it made elsewhere is left out, a result is
    # kept as what it is, text.
    return {"role": turn.role, "content": turn.content}


def _token_text(llama: Any, token: int) -> str:
    if token < 0:
        return ""
    return str(llama.detokenize([token], special=True).decode("utf-8", "ignore"))


@functools.cache
def shared_local_model(threads: int) -> LlamaCppChatModel:
    """The process's one bundled SmolLM2 chat model, so its weights load once."""
    return LlamaCppChatModel(threads=threads)
