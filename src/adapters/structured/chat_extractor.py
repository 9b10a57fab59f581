"""`StructuredExtractor` on chat models: any OpenAI-compatible endpoint, or the bundled
SmolLM2 (the local `ChatModel`, whose runner process constrains the answer to the schema).

Both ask for JSON constrained by the schema, and the answer is validated with `jsonschema`
before it is returned, whatever the provider promised. OpenAI-compatible servers differ in how
they take the schema: OpenAI and vLLM `response_format: {type: json_schema}`, llama-cpp-python
`{type: json_object, schema}`. The first is tried first; a server that rejects it, naming
`response_format`, is asked the second way from then on.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import httpx
import jsonschema

from adapters.llm.supervisor import STOPPED
from application.ports.chat_model import (
    ChatModel,
    ChatModelError,
    ChatRequest,
    ChatTurn,
    TextDelta,
)
from application.ports.structured_extractor import StructuredExtractionFailed

INSTRUCTIONS = (
    "You extract structured data from documents. Answer with one JSON object that matches "
    "the given JSON Schema, using only facts stated in the document; leave out what it "
    "does not say unless the schema requires it."
)
LOCAL_MODELS = ("smollm2-135m",)


class ChatStructuredExtractor:
    """Routes `openai:<model>` to an OpenAI-compatible endpoint, `local:smollm2-135m` to the
    bundled model."""

    def __init__(
        self,
        *,
        http_client: httpx.AsyncClient,
        openai_base_url: str,
        openai_api_key: str | None,
        max_text_chars: int = 12_000,
        timeout: float = 120.0,
        max_attempts: int = 3,
        local_model: ChatModel | None = None,
    ) -> None:
        self._http = http_client
        self._base_url = openai_base_url.rstrip("/")
        self._api_key = openai_api_key
        self._max_text_chars = max_text_chars
        self._timeout = timeout
        self._max_attempts = max_attempts
        self._local = local_model
        self._schema_style = 0

    async def extract(
        self, *, model: str, schema: Mapping[str, Any], text: str, file_name: str
    ) -> dict[str, Any]:
        try:
            jsonschema.Draft202012Validator.check_schema(dict(schema))
        except jsonschema.SchemaError as error:
            raise StructuredExtractionFailed(
                f"The extraction schema is not a valid JSON Schema: {error.message}"
            ) from None
        provider, _, name = model.partition(":")
        document = f"File: {file_name}\n\n{text[: self._max_text_chars]}"
        if provider == "openai":
            answer = await self._ask_openai(name, dict(schema), document)
        elif provider == "local" and name in LOCAL_MODELS and self._local is not None:
            answer = await self._ask_local(self._local, dict(schema), document)
        else:
            raise StructuredExtractionFailed(f"Unknown extraction model '{model}'.")
        return self._validated(answer, schema)

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

    async def _ask_openai(self, model: str, schema: dict[str, Any], document: str) -> str:
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        body = {
            "model": model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": f"{INSTRUCTIONS}\n\nSchema:\n{json.dumps(schema)}"},
                {"role": "user", "content": document},
            ],
        }
        styles = (
            {"type": "json_schema", "json_schema": {"name": "extraction", "schema": schema}},
            {"type": "json_object", "schema": schema},
        )
        attempt = 0
        while attempt < self._max_attempts:
            attempt += 1
            body["response_format"] = styles[self._schema_style]
            try:
                response = await self._http.post(
                    f"{self._base_url}/chat/completions",
                    json=body,
                    headers=headers,
                    timeout=self._timeout,
                )
            except httpx.TransportError:
                if attempt == self._max_attempts:
                    raise StructuredExtractionFailed(
                        "The extraction model could not be reached."
                    ) from None
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            if (
                response.status_code >= 400
                and self._schema_style + 1 < len(styles)
                and "response_format" in response.text
            ):
                self._schema_style += 1
                attempt -= 1
                continue
            if response.status_code == 429 or response.status_code >= 500:
                if attempt == self._max_attempts:
                    raise StructuredExtractionFailed(
                        f"The extraction model kept failing (HTTP {response.status_code})."
                    )
                await asyncio.sleep(0.5 * 2**attempt)
                continue
            if response.status_code >= 400:
                raise StructuredExtractionFailed(
                    f"The extraction model refused the request (HTTP {response.status_code})."
                )
            try:
                return str(response.json()["choices"][0]["message"]["content"])
            except (ValueError, KeyError, IndexError, TypeError):
                raise StructuredExtractionFailed(
                    "The extraction model sent an answer that could not be read."
                ) from None
        raise StructuredExtractionFailed("The extraction model could not be reached.")

    async def _ask_local(self, model: ChatModel, schema: dict[str, Any], document: str) -> str:
        request = ChatRequest(
            model="smollm2-135m",
            turns=[
                ChatTurn(role="system", content=INSTRUCTIONS),
                ChatTurn(role="user", content=document[:6000]),
            ],
            max_output_tokens=512,
            temperature=0,
            response_schema=schema,
        )
        pieces: list[str] = []
        try:
            async with asyncio.timeout(self._timeout):
                async for event in model.stream(request):
                    if isinstance(event, TextDelta):
                        pieces.append(event.text)
        except ChatModelError as failure:
            if failure.message == STOPPED:
                # A crashed runner is restarted: the queue's retry gets the next one.
                raise
            raise StructuredExtractionFailed(failure.message) from None
        except TimeoutError:
            raise StructuredExtractionFailed("The extraction model took too long.") from None
        return "".join(pieces)
