"""Picks the chat model for a `provider:model` reference."""

from __future__ import annotations

import threading

from adapters.chat.deadline import DeadlineChatModel
from adapters.chat.openai_compatible import OpenAIChatModel
from adapters.openai_gateway.gateway import OpenAIGateway
from adapters.openai_gateway.retry import CHAT_RETRY, RetryPolicy
from adapters.optional import LOCAL_CHAT_PACKAGES, LOCAL_EXTRA, missing
from application.ports.chat_model import ChatModel, ChatModelUnavailable
from domain.models import LOCAL_CHAT_MODELS


class DefaultChatModelRegistry:
    """`ChatModelRegistry` over the bundled SmolLM2 (`local:smollm2-135m`, the model given as
    `local_model`, run by its supervised runner; unavailable without one, or without the
    packages of the `local` extra) and the OpenAI-compatible endpoint behind `gateway`
    (`openai:<any model>`, tool-capable).

    OpenAI models are kept per name, so what one learned about the server (a refused optional
    field) is not learned again on every call. `timeout` bounds each call of an OpenAI model,
    `retry` its attempts before the answer begins.
    """

    def __init__(
        self,
        gateway: OpenAIGateway,
        *,
        timeout: float = 120.0,
        retry: RetryPolicy = CHAT_RETRY,
        local_model: ChatModel | None = None,
    ) -> None:
        self._gateway = gateway
        self._timeout = timeout
        self._retry = retry
        self._local = DeadlineChatModel(local_model, timeout) if local_model is not None else None
        self._local_missing: str | None = None
        self._local_checked = False
        self._openai: dict[str, OpenAIChatModel] = {}
        self._lock = threading.Lock()

    def get(self, model: str) -> ChatModel:
        provider, _, name = model.partition(":")
        if provider == "local" and name in LOCAL_CHAT_MODELS:
            missing = self._missing_local_package()
            if missing is not None:
                raise ChatModelUnavailable(
                    f"The local model '{model}' is not installed here (the {missing} package "
                    f"is missing): install {LOCAL_EXTRA}."
                )
            if self._local is not None:
                return self._local
        if provider == "openai" and name.strip():
            with self._lock:
                chat_model = self._openai.get(name)
                if chat_model is None:
                    chat_model = OpenAIChatModel(
                        self._gateway, name, timeout=self._timeout, retry=self._retry
                    )
                    self._openai[name] = chat_model
            return chat_model
        raise ChatModelUnavailable(f"The chat model '{model}' is not available here.")

    def _missing_local_package(self) -> str | None:
        if not self._local_checked:
            self._local_missing = next(iter(missing(LOCAL_CHAT_PACKAGES)), None)
            self._local_checked = True
        return self._local_missing
