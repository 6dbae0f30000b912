"""/metrics in the Prometheus text format: requests and their latencies, what the API wrote, and the
state of the process's pools, longpolls and database as they are at each scrape.

Counters and histograms are updated as requests end (``RequestLog``, the add route); the rest is
read when Prometheus scrapes (``Live``), so that a gauge never lags what it shows. Each worker
process of `neardup serve --workers N` keeps its own figures: a scrape answers for the worker that
took it, and says which (``neardup_worker_pid``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector

CONTENT_TYPE = CONTENT_TYPE_LATEST
# A "_created" series beside each counter and histogram doubles the scrape for a figure nobody reads.
disable_created_metrics()  # type: ignore[no-untyped-call]
# Request latencies, seconds: from a cached-token query on the event loop to a longpoll's minute.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Metrics:
    """The registry of one service process and the figures the requests update."""

    def __init__(self, served: Served) -> None:
        """Figures of a service, from zero; its gauges read from ``served`` at each scrape."""
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
        self.registry.register(Live(served))

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


# The gauges read at each scrape (``Served.gauges`` gives their values), with their help.
GAUGES = {
    "neardup_worker_pid": "The worker process that answered this scrape",
    "neardup_longpolls_waiting": "Changes-feed longpolls waiting for a change",
    "neardup_longpolls_limit": "Longpolls that may wait at once",
    "neardup_changes_listeners": "Waiters registered on the listening connection",
    "neardup_changes_listener_connected": "Whether the connection that hears the changes feed is up",
    "neardup_index_pool_in_use": "Open collection indexes in use by a request",
    "neardup_index_pool_idle": "Open collection indexes kept between requests",
    "neardup_connection_pool_idle": "Pooled database connections kept between requests",
    "neardup_worker_threads_busy": "Worker threads running a request's work",
    "neardup_worker_threads_limit": "Worker threads a process runs at most",
    "neardup_worker_threads_queued": "Requests waiting for a free worker thread (a queue)",
    "neardup_embedded_server_running": "Whether the embedded PostgreSQL server runs",
    "neardup_embedded_server_in_use": "Whether a process uses the embedded server",
    "neardup_embedded_server_idle_seconds": "Seconds since the embedded server's last user left (0 in use)",
}


class Served(Protocol):
    """What the gauges are read from (the service's ``Context``)."""

    def gauges(self) -> dict[str, float]:
        """The value of each gauge of ``GAUGES`` that applies now."""
        ...


class Live(Collector):
    """The figures read at each scrape: pools, longpolls, worker threads, the embedded server."""

    def __init__(self, served: Served) -> None:
        """Read from ``served``."""
        self._served = served

    def collect(self) -> Iterator[Metric]:
        """The gauges as they are now."""
        for name, value in self._served.gauges().items():
            yield GaugeMetricFamily(name, GAUGES[name], value=value)
