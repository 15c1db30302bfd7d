"""Prometheus metrics, one registry per server so that several servers can share a process."""

from __future__ import annotations

from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_BUCKETS = (0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            5.0, 10.0, 20.0, 30.0)


class _QueueCollector:
    def __init__(self, stats: Callable[[], dict], waiting: Callable[[], int]):
        self._stats = stats
        self._waiting = waiting

    def collect(self):
        g = GaugeMetricFamily("elasticmq_queue_messages", "Messages per queue and state",
                              labels=["region", "account", "queue", "state"])
        for key, (visible, inflight, delayed) in sorted(self._stats().items()):
            base = [key.region, key.account, key.name]
            g.add_metric(base + ["visible"], visible)
            g.add_metric(base + ["not_visible"], inflight)
            g.add_metric(base + ["delayed"], delayed)
        yield g
        yield GaugeMetricFamily("elasticmq_waiting_receives", "Long-polling receives parked now",
                                value=self._waiting())


class Metrics:
    def __init__(self, stats: Callable[[], dict], waiting: Callable[[], int]):
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests = Counter("elasticmq_requests", "SQS requests by action and outcome",
                                ["action", "outcome"], registry=self.registry)
        self.errors = Counter("elasticmq_errors", "SQS error responses by code",
                              ["action", "code"], registry=self.registry)
        self.latency = Histogram("elasticmq_request_seconds", "SQS request latency by action",
                                 ["action"], buckets=_BUCKETS, registry=self.registry)
        self.registry.register(_QueueCollector(stats, waiting))
        # label lookups are cached: .labels() is the expensive part of an observation
        self._req: dict[tuple[str, str], object] = {}
        self._lat: dict[str, object] = {}

    def observe(self, action: str, outcome: str, seconds: float, code: str | None = None) -> None:
        c = self._req.get((action, outcome))
        if c is None:
            c = self._req[(action, outcome)] = self.requests.labels(action, outcome)
        c.inc()
        h = self._lat.get(action)
        if h is None:
            h = self._lat[action] = self.latency.labels(action)
        h.observe(seconds)
        if code is not None:
            self.errors.labels(action, code).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
