"""`StructuredExtractor` on the chat models of a `ChatModelRegistry`: any OpenAI-compatible
endpoint (`openai:<model>`) or the bundled SmolLM2 (`local:smollm2-135m`).

The model is asked for JSON constrained by the schema through `ChatRequest.response_schema`:
each chat model knows how its provider takes one (the OpenAI-compatible model tries
`response_format: {type: json_schema}` and falls back to llama-cpp-python's
`{type: json_object, schema}`; the local runner constrains its grammar). The collected answer
is validated with `jsonschema` before it is returned, whatever the provider promised.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import jsonschema

from adapters.local_model.runner_client import STOPPED
from application.ports.chat_model import (
    CallMeter,
    ChatModel,
    ChatModelError,
    ChatModelRegistry,
    ChatModelUnavailable,
    ChatRequest,
    ChatTurn,
    TextDelta,
    Usage,
)
from application.ports.structured_extractor import StructuredExtractionFailed
from domain.models import LOCAL_CHAT_MODELS

INSTRUCTIONS = (
    "You extract structured data from documents. Answer with one JSON object that matches "
    "the given JSON Schema, using only facts stated in the document; leave out what it "
    "does not say unless the schema requires it."
)
# The bundled model's context is small: a shorter document and answer, and the schema only as
# its grammar, not repeated in the prompt.
LOCAL_MAX_TEXT_CHARS = 6000
LOCAL_MAX_OUTPUT_TOKENS = 512


class ChatStructuredExtractor:
    """Asks the registry's model for the schema's JSON and validates it.

    `timeout` bounds one extraction, `max_text_chars` the document given to a remote model,
    `max_output_tokens` the length of its answer (None: the model's own limit, as a large
    schema filled from a long document may need).
    """

    def __init__(
        self,
        registry: ChatModelRegistry,
        *,
        max_text_chars: int = 12_000,
        max_output_tokens: int | None = None,
        timeout: float = 120.0,
    ) -> None:
        self._registry = registry
        self._max_text_chars = max_text_chars
        self._max_output_tokens = max_output_tokens
        self._timeout = timeout

    async def extract(
        self,
        *,
        model: str,
        schema: Mapping[str, Any],
        text: str,
        file_name: str,
        meter: CallMeter,
    ) -> dict[str, Any]:
        try:
            jsonschema.Draft202012Validator.check_schema(dict(schema))
        except jsonschema.SchemaError as error:
            raise StructuredExtractionFailed(
                f"The extraction schema is not a valid JSON Schema: {error.message}"
            ) from None
        try:
            chat_model = self._registry.get(model)
        except ChatModelUnavailable as failure:
            provider, _, name = model.partition(":")
            if provider == "local" and name in LOCAL_CHAT_MODELS:
                # A model the platform ships but this installation cannot run: say why.
                raise StructuredExtractionFailed(failure.message) from None
            raise StructuredExtractionFailed(f"Unknown extraction model '{model}'.") from None
        request = self._request(model, dict(schema), text, file_name)
        answer = await self._ask(chat_model, request, meter)
        return self._validated(answer, schema)

    def _request(
        self, model: str, schema: dict[str, Any], text: str, file_name: str
    ) -> ChatRequest:
        provider, _, name = model.partition(":")
        document = f"File: {file_name}\n\n{text[: self._max_text_chars]}"
        if provider == "local":
            instructions = INSTRUCTIONS
            document = document[:LOCAL_MAX_TEXT_CHARS]
            max_output_tokens: int | None = LOCAL_MAX_OUTPUT_TOKENS
        else:
            instructions = f"{INSTRUCTIONS}\n\nSchema:\n{json.dumps(schema)}"
            max_output_tokens = self._max_output_tokens
        return ChatRequest(
            model=name,
            turns=[
                ChatTurn(role="system", content=instructions),
                ChatTurn(role="user", content=document),
            ],
            max_output_tokens=max_output_tokens,
            temperature=0,
            response_schema=schema,
        )

    async def _ask(self, chat_model: ChatModel, request: ChatRequest, meter: CallMeter) -> str:
        async with meter.metered(request, chat_model.info.context_tokens) as record:
            try:
                async with asyncio.timeout(self._timeout):
                    async for event in chat_model.stream(request):
                        if isinstance(event, TextDelta):
                            record.text.append(event.text)
                        elif isinstance(event, Usage):
                            record.usage = event
            except ChatModelError as failure:
                if failure.message == STOPPED:
                    # A crashed local runner is restarted: the queue's retry gets the next one.
                    raise
                raise StructuredExtractionFailed(failure.message) from None
            except TimeoutError:
                raise StructuredExtractionFailed("The extraction model took too long.") from None
            return "".join(record.text)

    @staticmethod
    def _validated(answer: str, schema: Mapping[str, Any]) -> dict[str, Any]:
        try:
            data = json.loads(answer)
        except (TypeError, ValueError):
            raise StructuredExtractionFailed("The model did not answer with JSON.") from None
        if not isinstance(data, dict):
            raise StructuredExtractionFailed("The model did not answer with a JSON object.")
        error = jsonschema.exceptions.best_match(
            jsonschema.Draft202012Validator(dict(schema)).iter_errors(data)
        )
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the top level"
            raise StructuredExtractionFailed(
                f"The extracted data does not match the schema at {where}: {error.message}"
            )
        return data
