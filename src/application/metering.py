"""Spend metering of model calls: each call reserves its worst-case cost against the
organization's spend caps before it starts, and settles to its real cost when it ends.

Shared by every use case that calls a priced model (chat answers and their tool-loop steps,
titles, structured extraction, embeddings). The worst case is the prompt's tokens bounded from
its UTF-8 size (no byte-level tokenizer makes more) and at most the model's context window,
plus the output limit; priced by the deployment's `PriceList`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

from application.ports.chat_model import CallRecord, ChatRequest, Usage
from application.ports.clock import Clock
from application.ports.embedder import Embedder, EmbedderRegistry
from application.ports.usage_ledger import UsageLedger
from domain.spend import (
    UNBOUNDED_OUTPUT_TOKENS,
    SpendCapReached,
    current_periods,
    estimated_tokens,
    worst_case_input_tokens,
)
from domain.usage import FREE, PendingCall, PriceList, UsageEntry, UsagePurpose

log = logging.getLogger(__name__)

# Longer than any model call is allowed to take: a reservation outliving its call only ever
# makes the cap stricter, until it expires.
RESERVATION_TTL = timedelta(minutes=15)
# How many abandoned reservations one pass of the reaper settles.
ABANDONED_BATCH = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class MeteredCall:
    """Who a model call is charged to, and why. `model` is `provider:model`; `run_id` the chat
    answer it is part of, if any."""

    org_id: str
    user_id: str | None
    thread_id: str | None
    purpose: UsagePurpose
    model: str
    run_id: str | None = None


@dataclass(frozen=True, slots=True)
class Reservation:
    """A call's reserved worst case, to settle or release exactly once."""

    id: str
    call: MeteredCall


def request_texts(request: ChatRequest) -> list[str]:
    """Everything a chat request sends the model: the turns (with their tool calls), the tool
    specifications and the response schema."""
    texts = [turn.content for turn in request.turns]
    texts += [json.dumps(call.arguments) for turn in request.turns for call in turn.tool_calls]
    texts += [
        f"{tool.name} {tool.description} {json.dumps(tool.parameters)}" for tool in request.tools
    ]
    if request.response_schema is not None:
        texts.append(json.dumps(request.response_schema))
    return texts


class SpendMeter:
    """Reserves, settles and releases model calls' costs in the usage ledger.

    Rules: a call is admitted while, in every capped period, what the ledger recorded plus what
    calls under way reserved is below the cap (`SpendCapReached` otherwise, with the periods
    reached); an organization without caps is never refused. A call's end records the
    provider's token counts (or, when it reported none, an estimate at four characters a token,
    marked as such) and drops the reservation in one transaction; a call that failed before
    producing anything is released, not charged. A reservation a dead process leaves behind
    stops counting against the caps after `RESERVATION_TTL`, and the reaper charges an estimate
    of its call (`settle_abandoned`), so that no call goes unrecorded. Recording failures are
    logged, not raised: the model has been paid for either way, and retrying the caller would
    call (and charge) it again.
    """

    def __init__(
        self, ledger: UsageLedger, prices: PriceList, clock: Clock, ttl: timedelta = RESERVATION_TTL
    ) -> None:
        self._ledger = ledger
        self._prices = prices
        self._clock = clock
        self._ttl = ttl

    @property
    def prices(self) -> PriceList:
        return self._prices

    def worst_case(
        self, model: str, texts: Sequence[str], max_output_tokens: int | None, context_tokens: int
    ) -> tuple[int, int]:
        """The most input and output tokens a call can use."""
        input_tokens = min(worst_case_input_tokens(texts), context_tokens)
        output_tokens = UNBOUNDED_OUTPUT_TOKENS if max_output_tokens is None else max_output_tokens
        return input_tokens, output_tokens

    async def reserve(
        self,
        call: MeteredCall,
        *,
        input_tokens: int,
        output_tokens: int,
        prompt_tokens: int = 0,
        text_offset: int = 0,
    ) -> Reservation:
        """Reserve the cost of this many tokens; raises `SpendCapReached` when refused.
        `prompt_tokens` (the prompt's estimate) and, for a chat answer's call, `text_offset`
        (how much text the answer had stored before it) are what the reaper charges from if the
        call's process dies before it settles. A reservation cut short (the task cancelled while
        it was recorded) is released, not left to be charged for a call never made."""
        reservation = Reservation(str(uuid.uuid4()), call)
        amount = self._prices.cost(call.model, input_tokens, output_tokens)
        pending = PendingCall(
            user_id=call.user_id,
            thread_id=call.thread_id,
            purpose=call.purpose,
            model=call.model,
            input_tokens=prompt_tokens,
            run_id=call.run_id,
            text_offset=text_offset,
        )
        try:
            breaches = await self._ledger.reserve(
                call.org_id,
                reservation.id,
                amount,
                ttl=self._ttl,
                periods=current_periods(self._clock.now()),
                call=pending,
            )
        except BaseException:
            await self.release(reservation)
            raise
        if breaches:
            raise SpendCapReached(breaches)
        return reservation

    async def reserve_request(
        self, call: MeteredCall, request: ChatRequest, context_tokens: int, text_offset: int = 0
    ) -> Reservation:
        """Reserve the worst case of one chat request (`text_offset` as in `reserve`)."""
        texts = request_texts(request)
        input_tokens, output_tokens = self.worst_case(
            call.model, texts, request.max_output_tokens, context_tokens
        )
        return await self.reserve(
            call,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            prompt_tokens=sum(estimated_tokens(text) for text in texts),
            text_offset=text_offset,
        )

    async def resize(
        self,
        reservation: Reservation,
        *,
        input_tokens: int,
        output_tokens: int,
        prompt_tokens: int | None = None,
    ) -> None:
        """Set an admitted reservation to the call's real worst case (and, with
        `prompt_tokens`, its prompt's estimate), once it is known."""
        amount = self._prices.cost(reservation.call.model, input_tokens, output_tokens)
        await self._ledger.resize(
            reservation.call.org_id, reservation.id, amount, prompt_tokens=prompt_tokens
        )

    async def finish(
        self, reservation: Reservation, *, prompt: Sequence[str], answer: str, usage: Usage | None
    ) -> None:
        """Settle a call from what it produced: the provider's figures, else an estimate from
        the text; a call with neither figures nor any answer failed before it ran and is
        released instead."""
        if usage is not None:
            await self.settle(reservation, usage, estimated=False)
        elif answer:
            estimate = Usage(
                input_tokens=sum(estimated_tokens(text) for text in prompt),
                output_tokens=estimated_tokens(answer),
            )
            await self.settle(reservation, estimate, estimated=True)
        else:
            await self.release(reservation)

    async def settle(self, reservation: Reservation, usage: Usage, *, estimated: bool) -> None:
        """Charge the call's cost and drop its reservation, in one transaction."""
        call = reservation.call
        entry = UsageEntry(
            org_id=call.org_id,
            user_id=call.user_id,
            thread_id=call.thread_id,
            purpose=call.purpose,
            model=call.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cost_usd=self._prices.cost(call.model, usage.input_tokens, usage.output_tokens),
            estimated=estimated,
        )
        try:
            await self._ledger.record(entry, settles=reservation.id)
        except Exception:
            log.exception("usage of %s (%s) could not be recorded", call.model, call.purpose.value)

    async def release(self, reservation: Reservation) -> None:
        """Drop the reservation of a call that cost nothing (it expires anyway if this fails)."""
        try:
            await self._ledger.release(reservation.call.org_id, reservation.id)
        except Exception:
            log.warning("reservation %s could not be released", reservation.id, exc_info=True)

    async def settle_abandoned(self, quiet: timedelta, limit: int = ABANDONED_BATCH) -> int:
        """Charge the calls whose process died before they settled (the worker's reaper): the
        prompt's estimate, and for a chat answer the text it stored, marked estimated; a
        reservation that recorded no call is released. Returns how many were settled."""
        settled = 0
        for abandoned in await self._ledger.abandoned(quiet, limit):
            pending = abandoned.call
            if pending is None:
                await self._ledger.release(abandoned.org_id, abandoned.reservation_id)
                continue
            call = MeteredCall(
                org_id=abandoned.org_id,
                user_id=pending.user_id,
                thread_id=pending.thread_id,
                purpose=pending.purpose,
                model=pending.model,
                run_id=pending.run_id,
            )
            output_tokens = -(-abandoned.output_chars // 4)
            usage = Usage(input_tokens=pending.input_tokens, output_tokens=output_tokens)
            await self.settle(Reservation(abandoned.reservation_id, call), usage, estimated=True)
            settled += 1
        return settled

    def scope(self, call: MeteredCall) -> ScopedMeter:
        """A `CallMeter` charging every call it meters to `call`'s organization and purpose."""
        return ScopedMeter(self, call)

    def embedders(
        self, registry: EmbedderRegistry, org_id: str, user_id: str | None = None
    ) -> EmbedderRegistry:
        """`registry` with the calls of its priced models metered for the organization (an
        unpriced model's embeddings cost nothing and are neither refused nor recorded)."""
        return _MeteredEmbedders(registry, self, org_id, user_id)


class _MeteredEmbedders:
    def __init__(
        self, inner: EmbedderRegistry, meter: SpendMeter, org_id: str, user_id: str | None
    ) -> None:
        self._inner = inner
        self._meter = meter
        self._org_id = org_id
        self._user_id = user_id

    def get(self, model: str, dimensions: int) -> Embedder:
        embedder = self._inner.get(model, dimensions)
        if self._meter.prices.price(model) == FREE:
            return embedder
        call = MeteredCall(
            org_id=self._org_id,
            user_id=self._user_id,
            thread_id=None,
            purpose=UsagePurpose.EMBEDDING,
            model=model,
        )
        return _MeteredEmbedder(embedder, self._meter, call)


class ScopedMeter:
    """`CallMeter` for one organization and purpose (see `SpendMeter.scope`)."""

    def __init__(self, meter: SpendMeter, call: MeteredCall) -> None:
        self._meter = meter
        self._call = call

    @asynccontextmanager
    async def metered(self, request: ChatRequest, context_tokens: int) -> AsyncIterator[CallRecord]:
        reservation = await self._meter.reserve_request(self._call, request, context_tokens)
        record = CallRecord()
        try:
            yield record
        finally:
            await self._meter.finish(
                reservation,
                prompt=request_texts(request),
                answer="".join(record.text),
                usage=record.usage,
            )


class _MeteredEmbedder:
    """An embedder whose every batch reserves its worst case (its texts' UTF-8 size in tokens)
    and settles to an estimate (embedding providers' figures are not passed through)."""

    def __init__(self, inner: Embedder, meter: SpendMeter, call: MeteredCall) -> None:
        self._inner = inner
        self._meter = meter
        self._call = call

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        worst = sum(len(text.encode("utf-8", "surrogatepass")) for text in texts)
        tokens = sum(estimated_tokens(text) for text in texts)
        reservation = await self._meter.reserve(
            self._call, input_tokens=worst, output_tokens=0, prompt_tokens=tokens
        )
        try:
            vectors = await self._inner.embed(texts)
        except BaseException:
            await self._meter.release(reservation)
            raise
        await self._meter.settle(reservation, Usage(tokens, 0), estimated=True)
        return vectors
