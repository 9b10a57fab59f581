"""Model usage: tokens in and out of every model call, and what they cost the organization."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum

MILLION = Decimal(1_000_000)


class UsagePurpose(StrEnum):
    """Why a model was called."""

    CHAT = "chat"
    TITLE = "title"
    EXTRACTION = "extraction"
    EMBEDDING = "embedding"


@dataclass(frozen=True, slots=True)
class ModelPrice:
    """US dollars per million input and output tokens."""

    input_per_million: Decimal
    output_per_million: Decimal

    def cost(self, input_tokens: int, output_tokens: int) -> Decimal:
        return (
            self.input_per_million * input_tokens + self.output_per_million * output_tokens
        ) / MILLION


FREE = ModelPrice(Decimal(0), Decimal(0))

# List prices of common hosted models (USD per million tokens); deployments override or extend
# them in configuration. Models run here (`local:`) cost nothing.
DEFAULT_PRICES: Mapping[str, ModelPrice] = {
    "openai:gpt-4o": ModelPrice(Decimal("2.50"), Decimal("10.00")),
    "openai:gpt-4o-mini": ModelPrice(Decimal("0.15"), Decimal("0.60")),
    "openai:gpt-4.1": ModelPrice(Decimal("2.00"), Decimal("8.00")),
    "openai:gpt-4.1-mini": ModelPrice(Decimal("0.40"), Decimal("1.60")),
    "openai:gpt-4.1-nano": ModelPrice(Decimal("0.10"), Decimal("0.40")),
}


class PriceList:
    """What each model costs. A model not priced (in configuration or the list above) costs
    nothing: the models run here (`local:`) unless a deployment prices them (to account for its
    hardware), and unknown hosted ones, whose tokens are still recorded so that a price added
    later can be applied to them."""

    def __init__(self, prices: Mapping[str, ModelPrice] | None = None) -> None:
        self._prices = dict(DEFAULT_PRICES)
        self._prices.update(prices or {})

    def price(self, model: str) -> ModelPrice:
        return self._prices.get(model, FREE)

    def cost(self, model: str, input_tokens: int, output_tokens: int) -> Decimal:
        return self.price(model).cost(input_tokens, output_tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageEntry:
    """One model call's tokens and cost, charged to an organization."""

    org_id: str
    user_id: str | None
    thread_id: str | None
    purpose: UsagePurpose
    model: str
    input_tokens: int
    output_tokens: int
    cost_usd: Decimal
    estimated: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingCall:
    """A model call under way as its reservation records it: enough to charge an estimate of
    it when the process making it dies before it settles. `input_tokens` is the prompt's
    estimate; `run_id` the chat answer the call is part of, if any, and `text_offset` how many
    characters of text that answer had stored when the call began."""

    user_id: str | None
    thread_id: str | None
    purpose: UsagePurpose
    model: str
    input_tokens: int
    run_id: str | None = None
    text_offset: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class AbandonedCall:
    """A reservation whose call can no longer settle itself (its answer ended without it, or it
    expired): `call` is None for a reservation that recorded no call, `output_chars` what text
    the call's answer stored."""

    reservation_id: str
    org_id: str
    call: PendingCall | None
    output_chars: int
