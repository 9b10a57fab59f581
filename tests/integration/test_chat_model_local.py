"""The bundled SmolLM2 through `LlamaCppChatModel` and its runner process: streaming, limits,
cancellation, trimming, JSON, and a runner that is killed or hangs mid-answer."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import AsyncIterator

import pytest

from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.local_model.runner_client import STOPPED, RunnerSettings
from application.ports.chat_model import (
    ChatModelError,
    ChatRequest,
    ChatTurn,
    Finished,
    TextDelta,
    Usage,
)


@pytest.fixture(scope="module")
async def model() -> AsyncIterator[LlamaCppChatModel]:
    model = LlamaCppChatModel(RunnerSettings(threads=2, stall_timeout=10))
    model.start()
    yield model
    await model.aclose()


def ask(text: str, *, max_output_tokens: int = 24, system: str | None = None) -> ChatRequest:
    turns = [ChatTurn(role="system", content=system)] if system else []
    turns.append(ChatTurn(role="user", content=text))
    return ChatRequest(
        model="smollm2-135m", turns=turns, max_output_tokens=max_output_tokens, temperature=0
    )


async def collect(model: LlamaCppChatModel, request: ChatRequest) -> list:
    return [event async for event in model.stream(request)]


async def test_text_streams_then_usage_then_finished(model):
    events = await collect(model, ask("What is the capital of France?"))

    *deltas, usage, finished = events
    assert deltas and all(isinstance(e, TextDelta) for e in deltas)
    assert "".join(d.text for d in deltas).strip()
    assert isinstance(usage, Usage)
    assert usage.input_tokens > 5
    assert 0 < usage.output_tokens <= 24
    assert isinstance(finished, Finished)
    assert finished.reason in ("stop", "length")
    assert not model.info.supports_tools


async def test_the_output_limit_ends_with_length(model):
    events = await collect(model, ask("Write a long story about a dragon.", max_output_tokens=4))

    assert events[-1] == Finished("length")
    assert events[-2].output_tokens == 4
    assert 1 <= sum(isinstance(e, TextDelta) for e in events) <= 4


async def test_closing_the_stream_stops_the_generation_and_frees_the_model(model):
    stream = model.stream(ask("Write a very long story about a dragon.", max_output_tokens=1000))
    deltas = 0
    async for event in stream:
        if isinstance(event, TextDelta):
            deltas += 1
            if deltas == 3:
                break
    started = time.monotonic()
    await stream.aclose()

    # The next call gets the model at once: the first one stopped instead of writing its
    # thousand tokens.
    events = await asyncio.wait_for(collect(model, ask("Hi", max_output_tokens=3)), 30)
    assert isinstance(events[-1], Finished)
    assert time.monotonic() - started < 30


async def test_concurrent_calls_take_turns(model):
    first, second = await asyncio.gather(
        collect(model, ask("Name a colour.", max_output_tokens=6)),
        collect(model, ask("Name a fruit.", max_output_tokens=6)),
    )
    for events in (first, second):
        assert isinstance(events[-1], Finished)
        assert any(isinstance(e, TextDelta) for e in events)


async def test_an_overlong_history_is_trimmed_and_still_answered():
    # A small context keeps the test quick; the rules are the same at 4096.
    small = LlamaCppChatModel(RunnerSettings(threads=2, n_ctx=512))
    turns = [ChatTurn(role="system", content="You are a helpful assistant. Answer briefly.")]
    for index in range(40):
        turns.append(ChatTurn(role="user", content=f"Tell me fact number {index} about the sea."))
        turns.append(ChatTurn(role="assistant", content="The sea is deep, wide and salty. " * 6))
    turns.append(ChatTurn(role="user", content="What colour is the sky on a clear day?"))
    request = ChatRequest(model="smollm2-135m", turns=turns, max_output_tokens=32, temperature=0)

    try:
        events = await collect(small, request)
    finally:
        await small.aclose()

    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.input_tokens <= 512 - 32
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()
    assert isinstance(events[-1], Finished)


async def test_a_single_message_longer_than_the_context_is_cut():
    small = LlamaCppChatModel(RunnerSettings(threads=2, n_ctx=256))
    request = ChatRequest(
        model="smollm2-135m",
        turns=[
            ChatTurn(role="system", content="Answer briefly."),
            ChatTurn(role="user", content="The ocean is large. " * 300 + "Summarize."),
        ],
        max_output_tokens=16,
        temperature=0,
    )

    try:
        events = await collect(small, request)
    finally:
        await small.aclose()

    usage = next(e for e in events if isinstance(e, Usage))
    assert usage.input_tokens <= 256 - 16
    assert isinstance(events[-1], Finished)


async def test_an_answer_can_be_constrained_to_a_json_schema(model):
    schema = {
        "type": "object",
        "properties": {"holidayDays": {"type": "integer"}},
        "required": ["holidayDays"],
    }
    request = ChatRequest(
        model="smollm2-135m",
        turns=[
            ChatTurn(role="system", content="Answer with JSON."),
            ChatTurn(role="user", content="Everyone gets 30 days of paid holiday every year."),
        ],
        max_output_tokens=48,
        temperature=0,
        response_schema=schema,
    )

    events = await collect(model, request)

    answer = json.loads("".join(e.text for e in events if isinstance(e, TextDelta)))
    assert isinstance(answer["holidayDays"], int)


async def _kill_mid_answer(model: LlamaCppChatModel, signum: int) -> list:
    """Start a long answer, send `signum` to the runner after its third token, and return the
    events received before the failure (which must be raised)."""
    pid = model.runner.pid
    assert pid is not None
    received = []
    with pytest.raises(ChatModelError) as failure:
        async for event in model.stream(ask("Write a long story.", max_output_tokens=500)):
            received.append(event)
            if len(received) == 3:
                os.kill(pid, signum)
    assert failure.value.message == STOPPED
    return received


async def test_a_runner_killed_mid_answer_fails_that_answer_and_the_next_one_works(model):
    await model.runner.wait_ready()
    starts = model.runner.starts
    killed = model.runner.pid

    received = await _kill_mid_answer(model, signal.SIGKILL)

    assert len(received) >= 3
    events = await asyncio.wait_for(collect(model, ask("Hi", max_output_tokens=3)), 60)
    assert isinstance(events[-1], Finished)
    assert model.runner.starts == starts + 1
    assert model.runner.pid not in (None, killed)


async def test_a_hung_runner_is_killed_after_the_stall_timeout_and_replaced(model):
    await model.runner.wait_ready()
    hung = model.runner.pid
    started = time.monotonic()

    await _kill_mid_answer(model, signal.SIGSTOP)

    assert 9 <= time.monotonic() - started < 40
    events = await asyncio.wait_for(collect(model, ask("Hi", max_output_tokens=3)), 60)
    assert isinstance(events[-1], Finished)
    assert model.runner.pid not in (None, hung)


async def test_calls_waiting_their_turn_survive_a_crash_of_the_one_in_progress(model):
    await model.runner.wait_ready()
    pid = model.runner.pid
    assert pid is not None

    async def crash_after_first_token() -> str:
        try:
            async for event in model.stream(ask("Write a long story.", max_output_tokens=500)):
                if isinstance(event, TextDelta):
                    os.kill(pid, signal.SIGKILL)
        except ChatModelError as error:
            return error.message
        return "finished"

    crashed, waiting = await asyncio.gather(
        crash_after_first_token(), collect(model, ask("Name a colour.", max_output_tokens=4))
    )

    assert crashed == STOPPED
    assert isinstance(waiting[-1], Finished)
