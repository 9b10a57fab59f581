"""`ChatStructuredExtractor` asks the chat model registry's model for the schema's JSON
(`ChatRequest.response_schema`), collects the streamed text and validates it; failures end in
`StructuredExtractionFailed` with the member-safe message."""

from __future__ import annotations

import pytest

from adapters.local_model.runner_client import STOPPED
from adapters.structured.chat_extractor import ChatStructuredExtractor
from application.ports.chat_model import (
    ChatModel,
    ChatModelError,
    ChatModelUnavailable,
    Finished,
    TextDelta,
)
from application.ports.structured_extractor import StructuredExtractionFailed
from tests.fakes.chat import ScriptedChatModel, text_script, unmetered

SCHEMA = {
    "type": "object",
    "properties": {"total": {"type": "number"}, "currency": {"type": "string"}},
    "required": ["total", "currency"],
}


class Registry:
    """Serves one scripted model under the names it knows; any other is unavailable, with the
    message given."""

    def __init__(self, models: dict[str, ChatModel], unavailable: str = "not here") -> None:
        self.models = models
        self.unavailable = unavailable
        self.asked: list[str] = []

    def get(self, model: str) -> ChatModel:
        self.asked.append(model)
        if model not in self.models:
            raise ChatModelUnavailable(self.unavailable)
        return self.models[model]


async def extract(extractor: ChatStructuredExtractor, model: str = "openai:gpt-4o-mini"):
    return await extractor.extract(
        model=model,
        schema=SCHEMA,
        text="Invoice total: 12.50 EUR",
        file_name="invoice.pdf",
        meter=unmetered(),
    )


async def test_the_answer_is_streamed_from_the_registrys_model_and_validated():
    chat = ScriptedChatModel(text_script('{"total": 12.5,', ' "currency": "EUR"}'))
    registry = Registry({"openai:gpt-4o-mini": chat})

    data = await extract(ChatStructuredExtractor(registry, max_output_tokens=300))

    assert data == {"total": 12.5, "currency": "EUR"}
    assert registry.asked == ["openai:gpt-4o-mini"]
    (request,) = chat.requests
    assert request.model == "gpt-4o-mini"
    assert request.response_schema == SCHEMA
    assert request.temperature == 0
    assert request.max_output_tokens == 300
    system, user = request.turns
    assert system.role == "system" and '"currency"' in system.content
    assert user.role == "user" and user.content.startswith("File: invoice.pdf")
    assert "Invoice total" in user.content


async def test_a_remote_answer_is_as_long_as_the_model_allows_by_default():
    chat = ScriptedChatModel(text_script('{"total": 12.5, "currency": "EUR"}'))

    await extract(ChatStructuredExtractor(Registry({"openai:gpt-4o-mini": chat})))

    (request,) = chat.requests
    assert request.max_output_tokens is None


async def test_the_bundled_model_gets_a_shorter_prompt():
    chat = ScriptedChatModel(text_script('{"total": 1, "currency": "USD"}'))
    extractor = ChatStructuredExtractor(Registry({"local:smollm2-135m": chat}))

    await extractor.extract(
        model="local:smollm2-135m",
        schema=SCHEMA,
        text="x" * 20_000,
        file_name="big.txt",
        meter=unmetered(),
    )

    (request,) = chat.requests
    assert request.model == "smollm2-135m"
    assert request.response_schema == SCHEMA
    assert request.max_output_tokens == 512
    assert len(request.turns[1].content) == 6000
    assert "Schema:" not in request.turns[0].content


async def test_a_remote_document_is_cut_at_max_text_chars():
    chat = ScriptedChatModel(text_script('{"total": 1, "currency": "USD"}'))
    extractor = ChatStructuredExtractor(Registry({"openai:m": chat}), max_text_chars=100)

    await extractor.extract(
        model="openai:m", schema=SCHEMA, text="y" * 500, file_name="f", meter=unmetered()
    )

    assert chat.requests[0].turns[1].content == "File: f\n\n" + "y" * 100


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("not json", "did not answer with JSON"),
        ("[1, 2]", "did not answer with a JSON object"),
        ('{"total": "twelve", "currency": "EUR"}', "does not match the schema at total"),
        ('{"total": 1}', "does not match the schema at the top level"),
    ],
)
async def test_bad_answers_fail_with_a_reason(answer, message):
    chat = ScriptedChatModel(text_script(answer))

    with pytest.raises(StructuredExtractionFailed, match=message):
        await extract(ChatStructuredExtractor(Registry({"openai:gpt-4o-mini": chat})))


async def test_a_model_failure_is_reported_with_its_member_safe_message():
    failure = ChatModelError("The model provider kept failing (HTTP 503).")
    chat = ScriptedChatModel([TextDelta('{"to'), failure])

    with pytest.raises(StructuredExtractionFailed) as caught:
        await extract(ChatStructuredExtractor(Registry({"openai:gpt-4o-mini": chat})))

    assert caught.value.message == "The model provider kept failing (HTTP 503)."
    assert chat.closed == 1


async def test_a_stopped_local_runner_is_left_for_the_queue_to_retry():
    chat = ScriptedChatModel([ChatModelError(STOPPED)])
    extractor = ChatStructuredExtractor(Registry({"local:smollm2-135m": chat}))

    with pytest.raises(ChatModelError) as caught:
        await extract(extractor, "local:smollm2-135m")

    assert not isinstance(caught.value, StructuredExtractionFailed)
    assert caught.value.message == STOPPED


async def test_a_slow_model_times_out():
    chat = ScriptedChatModel([TextDelta("{"), 5.0, Finished("stop")])
    extractor = ChatStructuredExtractor(Registry({"openai:gpt-4o-mini": chat}), timeout=0.05)

    with pytest.raises(StructuredExtractionFailed, match="took too long"):
        await extract(extractor)
    assert chat.closed == 1


@pytest.mark.parametrize("model", ["anthropic:claude", "openai:", "local:llama-70b", "gpt-4o"])
async def test_an_unknown_model_is_refused(model):
    with pytest.raises(StructuredExtractionFailed) as caught:
        await extract(ChatStructuredExtractor(Registry({})), model)

    assert caught.value.message == f"Unknown extraction model '{model}'."


async def test_the_bundled_model_without_its_packages_says_how_to_install_them():
    hint = "The local model 'local:smollm2-135m' is not installed here: install it."
    extractor = ChatStructuredExtractor(Registry({}, unavailable=hint))

    with pytest.raises(StructuredExtractionFailed) as caught:
        await extract(extractor, "local:smollm2-135m")

    assert caught.value.message == hint


async def test_an_invalid_schema_is_refused_before_asking_the_registry():
    registry = Registry({})

    with pytest.raises(StructuredExtractionFailed, match="not a valid JSON Schema"):
        await ChatStructuredExtractor(registry).extract(
            model="openai:m", schema={"type": "nope"}, text="t", file_name="f", meter=unmetered()
        )
    assert registry.asked == []
