"""Prometheus metrics of the HTTP app, in a registry of its own (never the process-wide
default, so that several apps in one process do not collide).

Live in the process: requests by route template, method and status, their latency, and the
chat streams open now (`HttpMetrics`, fed by `RequestContextMiddleware`). Read from Postgres at
each scrape: jobs, files and model usage (`OperationsCollector`). Labels carry route templates,
methods, status codes, job kinds, states and provider names only: never an id, a token, an
e-mail address or message text.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from adapters.postgres.operations import OperationsSnapshot

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
METRICS_PATH = "/metrics"
UNMATCHED_ROUTE = "unmatched"  # no route answered: the path itself is never a label
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# Seconds until the response's status and headers leave: a stream counts until it starts.
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
# The `le` labels as prometheus_client writes them (`1.0`, `0.005`).
_BUCKET_LABELS = tuple(repr(float(bound)) for bound in _LATENCY_BUCKETS)


class HttpMetrics:
    """The app's request counter, latency histogram and open-stream gauge."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._requests = _RequestCollector()
        self.registry.register(self._requests)
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
        series = self._requests.series.get((route, label_method))
        if series is None:
            series = self._requests.add(route, label_method)
        series.statuses[status] = series.statuses.get(status, 0) + 1
        series.buckets[bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        series.seconds += seconds

    def render(self, snapshot: OperationsSnapshot | None) -> bytes:
        """The text exposition: the live metrics, then the scrape's database readings (or
        `ap_metrics_database_up 0` when they could not be read)."""
        return generate_latest(self.registry) + generate_latest(OperationsCollector(snapshot))


@dataclass(slots=True)
class _Series:
    """One route template and method: answers by status, and how many took at most each of
    the latency buckets' bounds (the last, above all of them)."""

    statuses: dict[int, int] = field(default_factory=dict)
    buckets: list[int] = field(default_factory=lambda: [0] * (len(_LATENCY_BUCKETS) + 1))
    seconds: float = 0.0


class _RequestCollector(Collector):
    """`ap_http_requests_total` and `ap_http_request_duration_seconds` from plain counts.

    Every request adds to them, and prometheus_client's own counter and histogram take a lock
    for each of their three additions; these are only written and read on the event loop's
    thread (the middleware, and the metrics route rendering them), so plain integers do.
    """

    def __init__(self) -> None:
        self.series: dict[tuple[str | None, str], _Series] = {}

    def add(self, route: str | None, method: str) -> _Series:
        # A bounded set of keys: route templates (None for any unmatched path) and methods.
        series = self.series[(route, method)] = _Series()
        return series

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "ap_http_requests",
            "HTTP requests answered, by route template, method and status code",
            labels=("route", "method", "status"),
        )
        latency = HistogramMetricFamily(
            "ap_http_request_duration_seconds",
            "Seconds until a response's status and headers were sent, by route template and method",
            labels=("route", "method"),
        )
        for (route, method), series in list(self.series.items()):
            label_route = route or UNMATCHED_ROUTE
            for status, count in sorted(series.statuses.items()):
                requests.add_metric((label_route, method, str(status)), count)
            cumulative = list(accumulate(series.buckets))
            latency.add_metric(
                (label_route, method),
                buckets=[
                    *zip(_BUCKET_LABELS, cumulative[:-1], strict=True),
                    ("+Inf", cumulative[-1]),
                ],
                sum_value=series.seconds,
            )
        yield requests
        yield latency


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
