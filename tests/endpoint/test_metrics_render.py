"""The request metrics are plain counters rendered at scrape time (elasticmq_py.metrics): the
exposition must be what prometheus_client's labelled Counter/Histogram would have produced."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from elasticmq_py.metrics import _BUCKETS, Metrics

OBSERVATIONS = [
    ("SendMessage", "ok", 0.0003, None),
    ("SendMessage", "ok", 0.0005, None),          # exactly on a bucket bound: le="0.0005"
    ("SendMessage", "client_error", 0.002, "InvalidParameterValue"),
    ("ReceiveMessage", "ok", 20.5, None),          # above the last bound: +Inf only
    ("SendMessage", "server_error", 0.01, "InternalError"),
    ("SendMessage", "client_error", 0.0001, "InvalidParameterValue"),
]


def _reference() -> str:
    reg = CollectorRegistry(auto_describe=False)
    req = Counter("elasticmq_requests", "SQS requests by action and outcome", ["action", "outcome"], registry=reg)
    err = Counter("elasticmq_errors", "SQS error responses by code", ["action", "code"], registry=reg)
    lat = Histogram("elasticmq_request_seconds", "SQS request latency by action", ["action"], buckets=_BUCKETS,
                    registry=reg)
    for action, outcome, seconds, code in OBSERVATIONS:
        req.labels(action, outcome).inc()
        lat.labels(action).observe(seconds)
        if code is not None:
            err.labels(action, code).inc()
    return generate_latest(reg).decode()


def _samples(text: str, keep_created: bool = False) -> list:
    return [(s.name, tuple(sorted(s.labels.items())), s.value if not s.name.endswith("_created") else "t")
            for fam in text_string_to_metric_families(text) for s in fam.samples
            if keep_created or not s.name.endswith("_created")]


def _observed(shortcut: bool) -> Metrics:
    m = Metrics(lambda: {}, lambda: 0)
    for action, outcome, seconds, code in OBSERVATIONS:
        if shortcut and outcome == "ok":
            m.observe_ok(action, seconds)   # what the endpoint calls for a success
        else:
            m.observe(action, outcome, seconds, code)
    return m


def test_request_metrics_render_as_prometheus_client_would():
    for shortcut in (False, True):
        _check_renders_as_reference(_observed(shortcut))


def _check_renders_as_reference(m: Metrics) -> None:
    ours = m.render().decode()
    ref = _reference()
    ours_req = [line for line in ours.splitlines() if "elasticmq_queue" not in line and "waiting" not in line]
    assert _samples("\n".join(ours_req) + "\n", keep_created=True) == _samples(ref, keep_created=True)
    # the text itself, line for line, apart from the creation timestamps
    strip = [line.rsplit(" ", 1)[0] if "_created{" in line else line for line in ours_req]
    assert strip == [line.rsplit(" ", 1)[0] if "_created{" in line else line for line in ref.splitlines()]
