"""Recording a model call in the usage ledger, shared by the use cases that call models."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from application.ports.chat_model import ChatTurn, Usage
from application.ports.usage_ledger import UsageLedger
from domain.usage import PriceList, UsageEntry, UsagePurpose

log = logging.getLogger(__name__)


async def record_model_usage(
    ledger: UsageLedger,
    prices: PriceList,
    *,
    org_id: str,
    user_id: str | None,
    thread_id: str | None,
    purpose: UsagePurpose,
    model: str,
    turns: Sequence[ChatTurn],
    answer: str,
    usage: Usage | None,
) -> None:
    """Charge one model call to the organization. Without figures from the provider (a call cut
    short, a provider that reports none) the tokens are estimated at four characters each and
    the entry says so. A ledger failure is logged, not raised: the model has been paid for
    either way, and retrying the caller would call (and charge) it again."""
    estimated = usage is None
    if usage is None:
        prompt = sum(len(turn.content) for turn in turns)
        usage = Usage(input_tokens=prompt // 4 + 1, output_tokens=len(answer) // 4)
    try:
        await ledger.record(
            UsageEntry(
                org_id=org_id,
                user_id=user_id,
                thread_id=thread_id,
                purpose=purpose,
                model=model,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cost_usd=prices.cost(model, usage.input_tokens, usage.output_tokens),
                estimated=estimated,
            )
        )
    except Exception:
        log.exception("usage of %s (%s) could not be recorded", model, purpose.value)
