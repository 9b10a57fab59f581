"""`AP_CHAT_TIMEOUT` bounds a local model's answer as it bounds a provider's (issue 31 §1)."""

from __future__ import annotations

import time

import pytest

from adapters.chat.deadline import DeadlineChatModel
from application.ports.chat_model import ChatModelError, ChatRequest, ChatTurn, TextDelta
from tests.fakes.chat import ScriptedChatModel

REQUEST = ChatRequest(model="smollm2-135m", turns=[ChatTurn(role="user", content="hi")])


async def test_an_answer_past_the_timeout_fails_with_why_and_stops_the_model():
    inner = ScriptedChatModel([TextDelta("once "), 0.1, TextDelta("upon "), 30.0, TextDelta("x")])
    model = DeadlineChatModel(inner, 0.5)
    texts: list[str] = []
    started = time.monotonic()
    with pytest.raises(ChatModelError) as failure:
        async for event in model.stream(REQUEST):
            if isinstance(event, TextDelta):
                texts.append(event.text)
    assert time.monotonic() - started < 2
    assert texts == ["once ", "upon "]
    assert failure.value.message == "The local model did not finish its answer within 0.5 s."
    assert inner.closed == 1


async def test_an_answer_within_the_timeout_is_passed_through_whole():
    inner = ScriptedChatModel([TextDelta("fine")])
    model = DeadlineChatModel(inner, 5)
    assert model.info == inner.info
    events = [event async for event in model.stream(REQUEST)]
    assert TextDelta("fine") in events
