"""/metrics in the Prometheus text format: requests and their latencies, what the API wrote, and the
state of the process's pools, longpolls and database as they are at each scrape.

Counters and histograms are updated as requests end (``RequestLog``, the add route); the rest is
read when Prometheus scrapes (``Live``), so that a gauge never lags what it shows. Each worker
process of `neardup serve --workers N` keeps its own figures: a scrape answers for the worker that
took it, and says which (``neardup_worker_pid``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from neardup.service.context import Context

CONTENT_TYPE = CONTENT_TYPE_LATEST
# A "_created" series beside each counter and histogram doubles the scrape for a figure nobody reads.
disable_created_metrics()  # type: ignore[no-untyped-call]
# Request latencies, seconds: from a cached-token query on the event loop to a longpoll's minute.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The registry of one service process and the figures the requests update."""

    def __init__(self, ctx: Context) -> None:
        """Figures of ``ctx``'s service, from zero."""
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "neardup_http_requests",
            "HTTP requests answered, by route (its template), method and status",
            ["route", "method", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "neardup_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer, by route and method",
            ["route", "method"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.documents = Counter(
            "neardup_documents_written",
            "Documents the API wrote: added, replaced or removed",
            ["kind"],
            registry=self.registry,
        )
        self.pairs = Counter(
            "neardup_pairs_written", "New pairs stored by the API's adds", registry=self.registry
        )
        ProcessCollector(registry=self.registry)  # resident memory, CPU seconds, open files
        self.registry.register(Live(ctx))

    def request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request."""
        self.requests.labels(route, method, str(status)).inc()
        self.latency.labels(route, method).observe(seconds)

    def written(self, added: int, replaced: int, removed: int, pairs: int) -> None:
        """Count what one write of the API stored."""
        for kind, count in (("added", added), ("replaced", replaced), ("removed", removed)):
            if count:
                self.documents.labels(kind).inc(count)
        if pairs:
            self.pairs.inc(pairs)

    def exposition(self) -> bytes:
        """Every figure, in the Prometheus text format."""
        return generate_latest(self.registry)


def _gauge(name: str, text: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, value=value)


class Live(Collector):
    """The figures read at each scrape: pools, longpolls, worker threads, the embedded server."""

    def __init__(self, ctx: Context) -> None:
        """Read from ``ctx`` (the service's shared state)."""
        self._ctx = ctx

    def collect(self) -> Iterator[Metric]:
        """The gauges as they are now."""
        ctx = self._ctx
        yield _gauge(
            "neardup_worker_pid", "The process id of the worker that answered this scrape", os.getpid()
        )
        yield _gauge(
            "neardup_longpolls_waiting", "Changes-feed longpolls waiting for a change", ctx.longpolls.waiting
        )
        yield _gauge(
            "neardup_longpolls_limit",
            "Longpolls that may wait at once (--max-longpolls)",
            ctx.longpolls.limit,
        )
        callbacks, connected = ctx.db.listening()
        yield _gauge("neardup_changes_listeners", "Waiters registered on the listening connection", callbacks)
        yield _gauge(
            "neardup_changes_listener_connected",
            "Whether the connection that hears the changes feed's notifications is up",
            float(connected),
        )
        in_use, idle = ctx.indexes.sizes()
        yield _gauge("neardup_index_pool_in_use", "Open collection indexes in use by a request", in_use)
        yield _gauge("neardup_index_pool_idle", "Open collection indexes kept between requests", idle)
        yield _gauge(
            "neardup_connection_pool_idle", "Pooled database connections kept between requests", ctx.db.idle()
        )
        busy, limit, queued = ctx.threads()
        yield _gauge("neardup_worker_threads_busy", "Worker threads running a request's work", busy)
        yield _gauge("neardup_worker_threads_limit", "Worker threads a process runs at most", limit)
        yield _gauge(
            "neardup_worker_threads_queued", "Requests waiting for a free worker thread (a queue)", queued
        )
        embedded = ctx.embedded()
        if embedded is not None:
            running, in_use_, idle_seconds = embedded
            yield _gauge(
                "neardup_embedded_server_running", "Whether the embedded PostgreSQL server runs", running
            )
            yield _gauge(
                "neardup_embedded_server_in_use",
                "Whether a neardup process uses the embedded server",
                in_use_,
            )
            yield _gauge(
                "neardup_embedded_server_idle_seconds",
                "Seconds since the embedded server's last user left (0 while in use)",
                idle_seconds,
            )
