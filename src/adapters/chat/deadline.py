"""A bound on a chat model's whole answer, for models without one of their own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from application.ports.chat_model import (
    ChatEvent,
    ChatModel,
    ChatModelError,
    ChatModelInfo,
    ChatRequest,
)


class DeadlineChatModel:
    """`ChatModel` ending `inner`'s answer with `ChatModelError` once it has taken `seconds`
    (`AP_CHAT_TIMEOUT`, which the OpenAI adapter applies itself): a local model that keeps
    generating slowly is stopped like a provider that does, whatever its own stall timeout."""

    def __init__(self, inner: ChatModel, seconds: float, name: str = "local model") -> None:
        self._inner = inner
        self._seconds = seconds
        self._name = name

    @property
    def info(self) -> ChatModelInfo:
        return self._inner.info

    async def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        deadline = asyncio.get_running_loop().time() + self._seconds
        events = aiter(self._inner.stream(request))
        try:
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        event = await anext(events)
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise ChatModelError(
                        f"The {self._name} did not finish its answer within {self._seconds:g} s."
                    ) from None
                yield event
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()
