"""The one retry helper and gateway of the OpenAI-compatible adapters: which failures are worth
another attempt, how long to wait (the provider's `Retry-After` in its three forms, capped, or
backoff with jitter), how many attempts, and the provider's messages read and scrubbed."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from adapters.openai_gateway.gateway import OpenAIGateway, ProviderError
from adapters.openai_gateway.retry import (
    GaveUp,
    Retryable,
    RetryPolicy,
    is_retryable_status,
    is_retryable_transport,
    retry_after,
)

API_KEY = "sk-live-abcdef123456"


def test_retry_after_in_seconds_milliseconds_and_as_a_date():
    soon = datetime.now(UTC) + timedelta(seconds=30)
    past = datetime.now(UTC) - timedelta(seconds=30)

    assert retry_after(httpx.Headers({"retry-after": "7"})) == 7
    assert retry_after(httpx.Headers({"retry-after": "1.5"})) == 1.5
    assert retry_after(httpx.Headers({"retry-after-ms": "250", "retry-after": "7"})) == 0.25
    assert retry_after(httpx.Headers({"retry-after-ms": "soon", "retry-after": "7"})) == 7
    assert 25 < (retry_after(httpx.Headers({"retry-after": format_datetime(soon)})) or 0) <= 30
    assert retry_after(httpx.Headers({"retry-after": format_datetime(past)})) == 0
    assert retry_after(httpx.Headers({"retry-after": "-3"})) == 0
    assert retry_after(httpx.Headers({"retry-after": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


def test_the_providers_wait_is_honoured_up_to_the_cap():
    policy = RetryPolicy(max_retry_after=30.0)

    assert policy.delay(1, 2.5) == 2.5
    assert policy.delay(3, 0.0) == 0.0
    assert policy.delay(1, 3600.0) == 30.0
    assert policy.delay(1, -1.0) == 0.0


def test_backoff_doubles_with_jitter_up_to_its_maximum():
    policy = RetryPolicy(backoff_base=1.0, backoff_max=5.0)

    for attempt, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        delays = {policy.delay(attempt) for _ in range(50)}
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays)
        assert len(delays) > 1


def test_at_least_one_attempt():
    with pytest.raises(ValueError, match="at least 1"):
        RetryPolicy(max_attempts=0)


@pytest.mark.parametrize("status", [408, 409, 429, 500, 502, 503, 504, 529])
def test_retryable_statuses(status):
    assert is_retryable_status(status)


@pytest.mark.parametrize("status", [200, 400, 401, 403, 404, 413, 422])
def test_final_statuses(status):
    assert not is_retryable_status(status)


def test_transport_failures():
    request = httpx.Request("POST", "http://provider.test/v1/embeddings")
    connect = httpx.ConnectError("refused", request=request)
    connect_timeout = httpx.ConnectTimeout("slow", request=request)
    read_timeout = httpx.ReadTimeout("silent", request=request)
    pool_timeout = httpx.PoolTimeout("full", request=request)
    broken = httpx.RemoteProtocolError("peer closed", request=request)

    for error in (connect, connect_timeout, read_timeout, pool_timeout, broken):
        assert is_retryable_transport(error)
    # A streamed chat answer's read timeout means the provider fell silent: final.
    assert is_retryable_transport(connect, timeouts=False)
    assert is_retryable_transport(connect_timeout, timeouts=False)
    assert is_retryable_transport(broken, timeouts=False)
    assert not is_retryable_transport(read_timeout, timeouts=False)
    assert not is_retryable_transport(pool_timeout, timeouts=False)


class Attempts:
    """Fails with the scripted exceptions in turn, then answers."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "answer"


async def test_retryable_failures_are_tried_again_until_an_answer():
    attempts = Attempts(Retryable("HTTP 503"), Retryable("HTTP 429", delay=0.0))

    assert await RetryPolicy(max_attempts=3, backoff_base=0.001).run(attempts) == "answer"
    assert attempts.calls == 3


async def test_attempts_are_bounded():
    attempts = Attempts(*(Retryable(f"HTTP {status}") for status in (500, 502, 503, 504)))

    with pytest.raises(GaveUp) as gave_up:
        await RetryPolicy(max_attempts=3, backoff_base=0.001).run(attempts)

    assert attempts.calls == 3
    assert gave_up.value.attempts == 3
    assert gave_up.value.message == "HTTP 503"


async def test_any_other_failure_ends_at_once():
    attempts = Attempts(ValueError("refused"))

    with pytest.raises(ValueError, match="refused"):
        await RetryPolicy(max_attempts=5, backoff_base=0.001).run(attempts)
    assert attempts.calls == 1


async def test_the_providers_wait_is_slept():
    attempts = Attempts(Retryable("HTTP 429", delay=0.2))
    clock = asyncio.get_running_loop().time

    started = clock()
    await RetryPolicy(max_attempts=2, backoff_base=0.0, backoff_max=0.0).run(attempts)

    assert clock() - started >= 0.19


async def test_no_wait_that_would_reach_the_deadline():
    attempts = Attempts(Retryable("HTTP 429", delay=10.0))
    clock = asyncio.get_running_loop().time

    started = clock()
    with pytest.raises(GaveUp) as gave_up:
        await RetryPolicy(max_attempts=5).run(attempts, deadline=started + 1.0)

    assert clock() - started < 0.5
    assert gave_up.value.attempts == 1


def test_the_gateway_signs_and_addresses_requests():
    gateway = OpenAIGateway(httpx.AsyncClient(), base_url="http://vllm:8000/v1/", api_key=API_KEY)
    anonymous = OpenAIGateway(httpx.AsyncClient(), base_url="http://ollama:11434/v1", api_key="")

    assert gateway.url("chat/completions") == "http://vllm:8000/v1/chat/completions"
    assert gateway.url("/embeddings") == "http://vllm:8000/v1/embeddings"
    assert gateway.headers("text/event-stream") == {
        "Accept": "text/event-stream",
        "Authorization": f"Bearer {API_KEY}",
    }
    assert anonymous.api_key is None
    assert anonymous.headers("application/json") == {"Accept": "application/json"}
    assert not gateway.is_openai
    assert OpenAIGateway(httpx.AsyncClient()).is_openai


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            json.dumps(
                {"error": {"message": f"Bad key {API_KEY}, see https://p.test/k", "code": "k"}}
            ),
            ProviderError("k", "Bad key [redacted], see [link]"),
        ),
        (
            '{"error": {"message": "too long", "type": "invalid_request_error"}}',
            ProviderError("invalid_request_error", "too long"),
        ),
        ('{"detail": "no  such\\n model"}', ProviderError("", "no such model")),
        (
            '{"error": "key sk-other-9876543210 revoked"}',
            ProviderError("", "key [redacted] revoked"),
        ),
        ("<html>Bad gateway</html>", ProviderError("", "<html>Bad gateway</html>")),
        ("", ProviderError("", "")),
    ],
)
def test_provider_errors_are_read_and_scrubbed(body, expected):
    gateway = OpenAIGateway(httpx.AsyncClient(), api_key=API_KEY)

    assert gateway.provider_error(body) == expected


def test_a_long_provider_message_is_shortened():
    gateway = OpenAIGateway(httpx.AsyncClient())

    message = gateway.provider_error("x" * 1000).message

    assert len(message) == 300
    assert message.endswith("...")
