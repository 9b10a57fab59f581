"""Models: one OpenAI-compatible gateway (the shared HTTP client, base URL and key) under the
chat and embedding model registries, the bundled local models beside it, structured extraction
through the chat model registry, and the price list."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
from dishka import Provider, Scope, provide

from adapters.chat.llama_cpp import LlamaCppChatModel
from adapters.chat.registry import DefaultChatModelRegistry
from adapters.embeddings.registry import DefaultEmbedderRegistry
from adapters.local_model.runner_client import RunnerSettings
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.structured.chat_extractor import ChatStructuredExtractor
from application.ports.chat_model import ChatModelRegistry
from application.ports.embedder import EmbedderRegistry
from application.ports.structured_extractor import StructuredExtractor
from domain.usage import PriceList
from entrypoints.config import Settings


class ModelProvider(Provider):
    """One of each per process: the bundled chat model's supervised runner (started on first
    use, or at start-up when preloaded) is shared by chat, titles and structured extraction."""

    scope = Scope.APP

    @provide
    def openai_gateway(self, settings: Settings, client: httpx.AsyncClient) -> OpenAIGateway:
        return OpenAIGateway(
            client, base_url=settings.openai_base_url, api_key=settings.openai_api_key
        )

    @provide
    def embedders(self, settings: Settings, gateway: OpenAIGateway) -> EmbedderRegistry:
        return DefaultEmbedderRegistry(
            gateway=gateway,
            torch_threads=settings.torch_threads,
            local_runtime=settings.embedding_runtime,
        )

    @provide
    async def local_chat_model(self, settings: Settings) -> AsyncIterator[LlamaCppChatModel]:
        model = LlamaCppChatModel(
            RunnerSettings(
                threads=settings.local_llm_threads,
                memory_limit=settings.local_model_memory_mb * 1024 * 1024,
                stall_timeout=float(settings.local_model_stall_timeout),
            )
        )
        yield model
        await model.aclose()

    @provide
    def chat_models(
        self, settings: Settings, gateway: OpenAIGateway, local: LlamaCppChatModel
    ) -> ChatModelRegistry:
        return DefaultChatModelRegistry(gateway, timeout=settings.chat_timeout, local_model=local)

    @provide
    def structured_extractor(self, chat_models: ChatModelRegistry) -> StructuredExtractor:
        return ChatStructuredExtractor(chat_models)

    @provide
    def prices(self, settings: Settings) -> PriceList:
        return PriceList(settings.model_prices)
