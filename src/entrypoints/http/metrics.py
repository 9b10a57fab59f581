"""Prometheus metrics of the HTTP app, in a registry of its own (never the process-wide
default, so that several apps in one process do not collide).

Live in the process: requests by route template, method and status, their latency, and the
chat streams open now (`HttpMetrics`, fed by `RequestContextMiddleware`). Read from Postgres at
each scrape: jobs, files and model usage (`OperationsCollector`). Labels carry route templates,
methods, status codes, job kinds, states and provider names only: never an id, a token, an
e-mail address or message text.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapters.postgres.operations import OperationsSnapshot

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
METRICS_PATH = "/metrics"
UNMATCHED_ROUTE = "unmatched"  # no route answered: the path itself is never a label
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds until the response's status and headers leave: a stream counts until it starts.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class HttpMetrics:
    """The app's request counter, latency histogram and open-stream gauge."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = Counter(
            "ap_http_requests",
            "HTTP requests answered, by route template, method and status code",
            ("route", "method", "status"),
            registry=self.registry,
        )
        self._latency = Histogram(
            "ap_http_request_duration_seconds",
            "Seconds until a response's status and headers were sent, by route template and method",
            ("route", "method"),
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self._children: dict[tuple[str | None, str, int], tuple[Any, Any]] = {}
        self.open_streams = Gauge(
            "ap_chat_streams_open",
            "Chat answers being streamed to a client now (text/event-stream responses)",
            registry=self.registry,
        )

    def observe(
        self, *, route: str | None, method: str | None, status: int, seconds: float
    ) -> None:
        """Count one answered request; `route` is the matched route's template (None when no
        route matched). The metrics endpoint itself is not counted."""
        if route == METRICS_PATH:
            return
        label_method = method if method in _METHODS else "OTHER"
        key = (route, label_method, status)
        children = self._children.get(key)
        if children is None:
            # Looked up once per (route template, method, status), a bounded set: `labels()`
            # costs more than the count itself on every request.
            label_route = route or UNMATCHED_ROUTE
            children = (
                self._requests.labels(label_route, label_method, str(status)),
                self._latency.labels(label_route, label_method),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    def render(self, snapshot: OperationsSnapshot | None) -> bytes:
        """The text exposition: the live metrics, then the scrape's database readings (or
        `ap_metrics_database_up 0` when they could not be read)."""
        return generate_latest(self.registry) + generate_latest(OperationsCollector(snapshot))


class OperationsCollector(Collector):
    """One scrape's database readings as metric families."""

    def __init__(self, snapshot: OperationsSnapshot | None) -> None:
        self._snapshot = snapshot

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "ap_metrics_database_up",
            "1 when this scrape read the database's counts, 0 when it could not",
            value=0 if self._snapshot is None else 1,
        )
        yield up
        snapshot = self._snapshot
        if snapshot is None:
            return
        jobs = GaugeMetricFamily(
            "ap_jobs", "Jobs in the queue now, by kind and state", labels=("kind", "state")
        )
        for job in snapshot.jobs:
            jobs.add_metric((job.kind, job.state), job.count)
        yield jobs
        finished = GaugeMetricFamily(
            "ap_jobs_finished_last_hour",
            "Jobs that ended in the last hour, by kind and final state",
            labels=("kind", "state"),
        )
        for job in snapshot.finished_jobs:
            finished.add_metric((job.kind, job.state), job.count)
        yield finished
        files = GaugeMetricFamily(
            "ap_files",
            "Knowledge-base files of every organization, by processing state",
            labels=("state",),
        )
        for state, count in sorted(snapshot.files.items()):
            files.add_metric((state,), count)
        yield files
        tokens = CounterMetricFamily(
            "ap_model_tokens",
            "Model tokens recorded in the usage ledger, by provider and direction",
            labels=("provider", "direction"),
        )
        cost = CounterMetricFamily(
            "ap_model_cost_usd",
            "Model cost recorded in the usage ledger, in US dollars, by provider",
            labels=("provider",),
        )
        for usage in snapshot.usage:
            tokens.add_metric((usage.provider, "input"), usage.input_tokens)
            tokens.add_metric((usage.provider, "output"), usage.output_tokens)
            cost.add_metric((usage.provider,), float(usage.cost_usd))
        yield tokens
        yield cost
