"""Picks the chat model for a `provider:model` reference."""

from __future__ import annotations

import threading

import httpx

from adapters.chat.openai_compatible import OpenAIChatModel
from adapters.embeddings.openai_compatible import DEFAULT_OPENAI_BASE_URL
from application.ports.chat_model import ChatModel, ChatModelUnavailable
from domain.models import LOCAL_CHAT_MODELS


class DefaultChatModelRegistry:
    """`ChatModelRegistry` over the bundled SmolLM2 (`local:smollm2-135m`, the model given as
    `local_model`, run by its supervised runner; unavailable without one) and one
    OpenAI-compatible endpoint (`openai:<any model>`, tool-capable).

    OpenAI models are kept per name, so what one learned about the server (a refused optional
    field) is not learned again on every call. The `httpx` client is shared, owned by the
    caller.
    """

    def __init__(
        self,
        http_client: httpx.AsyncClient,
        openai_base_url: str = DEFAULT_OPENAI_BASE_URL,
        openai_api_key: str | None = None,
        timeout: float = 120.0,
        *,
        local_model: ChatModel | None = None,
    ) -> None:
        self._http_client = http_client
        self._openai_base_url = openai_base_url
        self._openai_api_key = openai_api_key or None
        self._timeout = timeout
        self._local = local_model
        self._openai: dict[str, OpenAIChatModel] = {}
        self._lock = threading.Lock()

    def get(self, model: str) -> ChatModel:
        provider, _, name = model.partition(":")
        if provider == "local" and name in LOCAL_CHAT_MODELS and self._local is not None:
            return self._local
        if provider == "openai" and name.strip():
            with self._lock:
                chat_model = self._openai.get(name)
                if chat_model is None:
                    chat_model = OpenAIChatModel(
                        self._http_client,
                        name,
                        base_url=self._openai_base_url,
                        api_key=self._openai_api_key,
                        timeout=self._timeout,
                    )
                    self._openai[name] = chat_model
            return chat_model
        raise ChatModelUnavailable(f"The chat model '{model}' is not available here.")
