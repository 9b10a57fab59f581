"""The bundled SmolLM2 run by llama-cpp-python, synchronously: what the local-model runner
process does with each request. Nothing here is imported by the server itself.

A prompt longer than the context loses its oldest turns first, keeping the system turn and the
member's last message, which are cut at the end as a last resort; room is always left for the
answer. A request may ask for JSON that matches a schema (grammar-constrained decoding).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from adapters.local_model.bundled import bundled_smollm2_path

DEFAULT_CONTEXT_TOKENS = 4096
# Tokens of the chat template around one message (`<|im_start|>role\n ... <|im_end|>\n`).
MESSAGE_OVERHEAD = 6
TOO_LONG = "The conversation is too long for the local model."


class EngineError(Exception):
    """A request the model cannot serve; the message is safe to show to the member."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LlamaEngine:
    """One GGUF chat model loaded in this process (`n_ctx` 0: the model's own context)."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        threads: int = 2,
        n_ctx: int = DEFAULT_CONTEXT_TOKENS,
    ) -> None:
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        path = model_path or bundled_smollm2_path()
        self.llama: Any = Llama(
            model_path=str(path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            verbose=False,
        )
        self._formatter: Any = None
        template = self.llama.metadata.get("tokenizer.chat_template")
        if template and self.llama.chat_format == "chat_template.default":
            # The same formatter llama-cpp-python builds for this template, to count the
            # prompt's tokens exactly as the model will see them.
            self._formatter = Jinja2ChatFormatter(
                template=template,
                eos_token=_token_text(self.llama, self.llama.token_eos()),
                bos_token=_token_text(self.llama, self.llama.token_bos()),
            )

    @property
    def n_ctx(self) -> int:
        return int(self.llama.n_ctx())

    def generate(
        self,
        messages: list[dict[str, str]],
        *,
        max_tokens: int,
        temperature: float | None,
        json_schema: dict[str, Any] | None,
        emit: Callable[[str], None],
        stopped: Callable[[], bool],
    ) -> tuple[str, int, int]:
        """Stream the answer's text to `emit` until done or `stopped()`; returns the finish
        reason (`stop`, `length`, or `cancelled`) and the input and output token counts."""
        n_ctx = self.n_ctx
        reserve = max(1, min(max_tokens, n_ctx // 2))
        messages, prompt_tokens = self._fit(messages, n_ctx - reserve)
        max_tokens = max(1, min(max_tokens, n_ctx - prompt_tokens))
        options: dict[str, Any] = {}
        if temperature is not None:
            options["temperature"] = temperature
        if json_schema is not None:
            options["response_format"] = {"type": "json_object", "schema": json_schema}
        chunks = self.llama.create_chat_completion(
            messages=messages, stream=True, max_tokens=max_tokens, **options
        )
        pieces: list[str] = []
        reason = "stop"
        try:
            for chunk in chunks:
                if stopped():
                    return "cancelled", prompt_tokens, len(pieces)
                choice = chunk["choices"][0]
                text = choice["delta"].get("content")
                if text:
                    pieces.append(text)
                    emit(text)
                if choice["finish_reason"] is not None:
                    reason = choice["finish_reason"]
        finally:
            chunks.close()
        if reason == "length":
            return "length", prompt_tokens, max_tokens
        return "stop", prompt_tokens, len(self._tokens("".join(pieces), add_bos=False))

    def _tokens(self, text: str, *, add_bos: bool, special: bool = False) -> list[int]:
        tokens: list[int] = self.llama.tokenize(
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
            raise EngineError(TOO_LONG)
        return kept, total

    def _truncated(self, messages: list[dict[str, str]], excess: int) -> list[dict[str, str]]:
        """The messages with the longest one cut at its end by `excess` tokens and a margin."""
        sizes = [len(self._tokens(m["content"], add_bos=False)) for m in messages]
        longest = max(range(len(messages)), key=sizes.__getitem__)
        keep = max(0, sizes[longest] - excess - MESSAGE_OVERHEAD)
        tokens = self._tokens(messages[longest]["content"], add_bos=False)[:keep]
        content = self.llama.detokenize(tokens).decode("utf-8", "ignore")
        shortened = {**messages[longest], "content": content}
        return [shortened if i == longest else m for i, m in enumerate(messages)]


def _token_text(llama: Any, token: int) -> str:
    if token < 0:
        return ""
    return str(llama.detokenize([token], special=True).decode("utf-8", "ignore"))
