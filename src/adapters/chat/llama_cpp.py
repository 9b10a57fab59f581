"""`ChatModel` for the bundled SmolLM2, run by llama-cpp-python in a supervised runner process
(`adapters.local_model.runner`), never in the process that calls it.

The runner is started once (`start`, or the first call) and keeps the model loaded. Calls take
turns on it; closing the event iterator stops the generation at the next token. If the runner
crashes, hangs or runs out of memory, the call in progress raises `ChatModelError` with
"The local model stopped unexpectedly." and the runner is started again for the next one. A
prompt longer than the context loses its oldest turns first (see `adapters.local_model.engine`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from adapters.local_model.protocol import Delta
from adapters.local_model.runner_client import LocalModelRunner, RunnerFailure, RunnerSettings
from application.ports.chat_model import (
    ChatEvent,
    ChatModelError,
    ChatModelInfo,
    ChatRequest,
    Finished,
    TextDelta,
    Usage,
)

# "No limit of its own": the runner clips it to the context the prompt leaves.
UNBOUNDED_TOKENS = 1_000_000


class LlamaCppChatModel:
    """The bundled model behind one supervised runner (`settings` say how it runs)."""

    def __init__(self, settings: RunnerSettings | None = None) -> None:
        self._runner = LocalModelRunner(settings)
        self._info = ChatModelInfo(
            supports_tools=False, context_tokens=(settings or RunnerSettings()).n_ctx
        )

    @property
    def info(self) -> ChatModelInfo:
        return self._info

    @property
    def runner(self) -> LocalModelRunner:
        return self._runner

    def start(self) -> None:
        """Start the runner now, so that the first answer pays no load."""
        self._runner.start()

    async def aclose(self) -> None:
        await self._runner.aclose()

    def stream(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        return self._events(request)

    async def _events(self, request: ChatRequest) -> AsyncIterator[ChatEvent]:
        # The bundled model takes no tools: a call it made elsewhere is left out, a result is
        # kept as what it is, text.
        events = self._runner.generate(
            [(turn.role, turn.content) for turn in request.turns],
            max_tokens=request.max_output_tokens or UNBOUNDED_TOKENS,
            temperature=request.temperature,
            json_schema=request.response_schema,
        )
        try:
            async for event in events:
                if isinstance(event, Delta):
                    yield TextDelta(event.text)
                else:
                    yield Usage(input_tokens=event.input_tokens, output_tokens=event.output_tokens)
                    yield Finished("length" if event.reason == "length" else "stop")
        except RunnerFailure as failure:
            raise ChatModelError(failure.message) from None
        finally:
            await events.aclose()
