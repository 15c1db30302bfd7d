"""Prometheus metrics, one registry per server so that several servers can share a process."""

from __future__ import annotations

import time
from bisect import bisect_left as _bisect_left
from typing import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client import metrics as _prom_metrics
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from cluster.status import JournalInfo, NodeStatus

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_BUCKETS = (0.0002, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
            5.0, 10.0, 20.0, 30.0)
_BOUND_LABELS = tuple(floatToGoString(b) for b in _BUCKETS) + ("+Inf",)


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


class _GcCollector:
    """The managed collector's turns (elasticmq_py/gcpolicy.py), when this process runs one."""

    def collect(self):
        from elasticmq_py.gcpolicy import installed
        policy = installed()
        if policy is None:
            return
        st = policy.stats
        yield CounterMetricFamily("elasticmq_gc_turns", "Collect-and-freeze turns of the managed collector",
                                  value=st.turns)
        yield CounterMetricFamily("elasticmq_gc_reclaims", "Full collections of everything, frozen objects included",
                                  value=st.reclaims)
        yield CounterMetricFamily("elasticmq_gc_reclaims_skipped",
                                  "Turns when a full collection was due but too many objects were frozen",
                                  value=policy.reclaims_skipped)
        yield CounterMetricFamily("elasticmq_gc_collected_objects", "Objects the managed turns found unreachable",
                                  value=st.collected)
        yield CounterMetricFamily("elasticmq_gc_pause_seconds", "Time spent in the managed turns",
                                  value=st.pause_total_s)
        yield GaugeMetricFamily("elasticmq_gc_pause_max_seconds", "The longest managed turn so far",
                                value=st.pause_max_s)
        yield GaugeMetricFamily("elasticmq_gc_frozen_objects",
                                "Objects frozen out of collections, as last counted (once per reclaim period)",
                                value=st.frozen)


class _ClusterCollector:
    """Membership gauges from the node's status (the same values GET /cluster shows)."""

    def __init__(self, status: Callable[[], NodeStatus]):
        self._status = status

    def collect(self):
        st = self._status()
        view = st.view
        yield GaugeMetricFamily("elasticmq_cluster_active",
                                "1 if this node is the active master (serves SQS calls), else 0",
                                value=1 if st.active else 0)
        yield GaugeMetricFamily("elasticmq_cluster_master", "1 if this node is the master of the current view",
                                value=1 if view is not None and view.master == st.node else 0)
        yield GaugeMetricFamily("elasticmq_cluster_quorum", "1 if this node sees a quorum of the members",
                                value=1 if st.quorum else 0)
        if view is not None:
            yield GaugeMetricFamily("elasticmq_cluster_view_id", "Id of the view installed on this node",
                                    value=view.view_id)
            yield GaugeMetricFamily("elasticmq_cluster_epoch", "Epoch of the current view", value=view.epoch)
            yield GaugeMetricFamily("elasticmq_cluster_view_members", "Members of the current view",
                                    value=len(view.members))
        if st.term is not None:
            yield GaugeMetricFamily("elasticmq_cluster_raft_term", "This node's Raft term", value=st.term)
        if st.configured is not None:
            yield GaugeMetricFamily("elasticmq_cluster_configured_members", "Members in the Raft configuration",
                                    value=len(st.configured))
        link = GaugeMetricFamily("elasticmq_cluster_peer_link_up",
                                 "1 if the link to/from the peer is connected (out: we dial it; in: it dialled us)",
                                 labels=["peer", "direction"])
        for peer, info in sorted(st.peers.items()):
            link.add_metric([peer, "out"], 1 if info.out == "up" else 0)
            link.add_metric([peer, "in"], 1 if info.incoming else 0)
        yield link
        if st.raft is not None:
            yield GaugeMetricFamily("elasticmq_cluster_auth_failures",
                                    "Raft connections refused for a wrong cluster secret",
                                    value=st.raft.auth_failures)
        if st.groups:
            yield from _group_gauges(st)


def _group_gauges(st: NodeStatus):
    """Replication groups ([cluster] groups >= 2): one series per group, labelled ``group``."""
    master = GaugeMetricFamily("elasticmq_cluster_group_master",
                               "1 if this node is the group's master, as the committed view names it", labels=["group"])
    serving = GaugeMetricFamily("elasticmq_cluster_group_serving",
                                "1 while this node is the group's active master (serves its queues)", labels=["group"])
    epoch = GaugeMetricFamily("elasticmq_cluster_group_epoch", "The group's epoch", labels=["group"])
    queues = GaugeMetricFamily("elasticmq_cluster_group_queues", "Queues in this node's copy of the group",
                               labels=["group"])
    for g in st.groups:
        label = [str(g.id)]
        master.add_metric(label, 1 if g.master == st.node else 0)
        serving.add_metric(label, 1 if g.serving else 0)
        epoch.add_metric(label, g.epoch)
        queues.add_metric(label, g.queues)
    yield from (master, serving, epoch, queues)


class _ReplicationCollector:
    """Mutation-stream gauges from the replication part of the node's status. Nothing is emitted
    while replication is off, so a single node's /metrics stays as it was. A figure the node does
    not report (a replica has no replicas, a master no applied seq) is left out rather than shown
    as 0, which would read as a real value."""

    def __init__(self, status: Callable[[], NodeStatus]):
        self._status = status

    def collect(self):
        r = self._status().replication
        if not r.enabled:
            return

        def gauge(name: str, doc: str, value, scale: float = 1.0):
            if value is None:
                return None
            return GaugeMetricFamily(f"elasticmq_replication_{name}", doc, value=float(value) * scale)

        log = r.log
        gauges = [
            gauge("enabled", "1: this node takes part in the mutation stream", 1),
            gauge("serving", "1 while the stream lets this node serve (a new master: once synchronised "
                             "with a majority)", r.serving),
            gauge("halted", "1 if the stream is halted: the master cannot reach a replica, or a replica "
                            "its master", r.halted),
            gauge("throttling", "1 while the master throttles producers for a lagging reachable replica",
                  r.throttling),
            gauge("delay_seconds", "Age of the oldest mutation not acknowledged by every replica",
                  r.delay_ms, 0.001),
            gauge("queue_ops", "Client operations waiting to be replicated or acknowledged",
                  r.replication_queue),
            gauge("epoch", "Epoch of the mutation stream", r.epoch),
            gauge("log_last_seq", "Last sequence number in the replication log", log and log.last_seq),
            gauge("log_entries", "Batches held in the replication log", log and log.entries),
            gauge("log_bytes", "Size of the replication log", log and log.bytes),
            gauge("applied_seq", "Last sequence number applied on this replica", r.applied_seq),
            gauge("rejected_frames", "Stream frames dropped as unauthenticated, malformed or stale",
                  r.rejected_frames),
        ]
        yield from (g for g in gauges if g is not None)

        per_replica = {
            "connected": ("replica_connected", "1 if the master's link to the replica is up", 1.0),
            "acked_seq": ("replica_acked_seq", "Highest sequence number the replica acknowledged", 1.0),
            "lag_batches": ("replica_lag_batches", "Batches the replica has not acknowledged yet", 1.0),
            "lag_ms": ("replica_lag_seconds", "Age of the oldest batch the replica has not acknowledged", 0.001),
            "needs_transfer": ("replica_needs_transfer", "1 if the replica is behind the log and needs a "
                                                         "state transfer", 1.0),
        }
        replicas = sorted(r.replicas.items())  # only the master has replicas
        for key, (name, doc, scale) in per_replica.items() if replicas else ():
            g = GaugeMetricFamily(f"elasticmq_replication_{name}", doc, labels=["replica"])
            for replica, info in replicas:
                if getattr(info, key) is not None:
                    g.add_metric([replica], float(getattr(info, key)) * scale)
            yield g

        t = r.last_transfer
        if t is not None:
            labels = [t.direction, t.peer]
            for key, name, doc in (
                ("records", "records", "Records in the last state transfer"),
                ("bytes", "bytes", "Bytes in the last state transfer"),
                ("duration_s", "duration_seconds", "Duration of the last state transfer"),
                ("at", "timestamp_seconds", "Unix time of the last state transfer"),
            ):
                if getattr(t, key) is not None:
                    g = GaugeMetricFamily(f"elasticmq_replication_last_transfer_{name}", doc,
                                          labels=["direction", "peer"])
                    g.add_metric(labels, float(getattr(t, key)))
                    yield g


class _JournalCollector:
    """The data-dir's journal (cluster/journaling.py): nothing while the node is in memory."""

    def __init__(self, journal: Callable[[], JournalInfo | None]):
        self._journal = journal

    def collect(self):
        j = self._journal()
        if j is None:
            return

        def gauge(name: str, doc: str, value, scale: float = 1.0):
            if value is None:
                return None
            return GaugeMetricFamily(f"elasticmq_journal_{name}", doc, value=float(value) * scale)

        snap, rec = j.last_snapshot, j.recovery
        fsyncs = CounterMetricFamily("elasticmq_journal_fsyncs", "fsyncs of the journal (group commits)")
        fsyncs.add_metric([], float(j.fsyncs))
        yield fsyncs
        gauges = [
            gauge("bytes", "Size of the journal's segments and snapshots on disk", j.bytes),
            gauge("segments", "Journal segment files", j.segments),
            gauge("durable_seq", "Last log position the journal holds as durably as its policy says", j.durable_seq),
            gauge("fsyncs_per_second", "fsyncs per second over the last few seconds", j.fsyncs_per_s),
            gauge("fsync_seconds_last", "Duration of the last fsync", j.fsync_ms_last, 0.001),
            gauge("fsync_seconds_avg", "Mean duration of an fsync since start", j.fsync_ms_avg, 0.001),
            gauge("entries_per_fsync", "Journal entries (batches) each fsync carried, on average",
                  j.entries_per_fsync),
            gauge("queue_depth", "Writes handed to the journal writer and not yet written", j.queue_depth),
            gauge("failed", "1 once the journal failed (a full disk, an I/O error): the node stores nothing "
                            "until restarted", 1 if j.error else 0),
            gauge("last_snapshot_bytes", "Size of the last compaction snapshot", snap and snap.bytes),
            gauge("last_snapshot_duration_seconds", "How long the last compaction snapshot took to write",
                  snap and snap.duration_s),
            gauge("last_snapshot_timestamp_seconds", "Unix time the last compaction snapshot finished",
                  snap and snap.finished_at),
            gauge("recovery_seconds", "How long recovery from the journal took at start", rec and rec.seconds),
            gauge("recovered_messages", "Messages recovered from the journal at start", rec and rec.messages),
        ]
        yield from (g for g in gauges if g is not None)


class _Latency:
    """One action's latency histogram, as plain numbers."""

    __slots__ = ("buckets", "sum", "created")

    def __init__(self) -> None:
        self.buckets = [0] * (len(_BUCKETS) + 1)     # per bucket, not cumulative; the last is +Inf
        self.sum = 0.0
        self.created = time.time()


class _RequestCollector:
    """Renders the request metrics in the families prometheus_client's Counter and Histogram
    would produce (same names, samples, sample order, ``_created`` series), from plain counters:
    an observation is a few dict and list operations, where a labelled Counter/Histogram took a
    lock per increment and walked the buckets in Python (~3 us a request, measured)."""

    def __init__(self, metrics: "Metrics"):
        self._m = metrics

    def collect(self):
        created = getattr(_prom_metrics, "_use_created", True)
        m = self._m
        yield _counter("elasticmq_requests", "SQS requests by action and outcome", ("action", "outcome"),
                       m._requests, created)
        yield _counter("elasticmq_errors", "SQS error responses by code", ("action", "code"), m._errors, created)
        lat = Metric("elasticmq_request_seconds", "SQS request latency by action", "histogram")
        for action, h in list(m._latency.items()):
            acc = 0.0
            for bound, n in zip(_BOUND_LABELS, list(h.buckets)):
                acc += n
                lat.add_sample("elasticmq_request_seconds_bucket", {"action": action, "le": bound}, acc)
            lat.add_sample("elasticmq_request_seconds_count", {"action": action}, acc)
            lat.add_sample("elasticmq_request_seconds_sum", {"action": action}, h.sum)
            if created:
                lat.add_sample("elasticmq_request_seconds_created", {"action": action}, h.created)
        yield lat


class Metrics:
    def __init__(self, stats: Callable[[], dict], waiting: Callable[[], int],
                 cluster: Callable[[], NodeStatus] | None = None,
                 journal: Callable[[], JournalInfo | None] | None = None):
        self.registry = CollectorRegistry(auto_describe=False)
        # Per-request work is a few dict lookups and increments; the Prometheus families are
        # built only when /metrics is scraped. Insertion order = the order of first observation,
        # as prometheus_client lists a metric's children.
        self._requests: dict[tuple[str, str], list] = {}   # (action, outcome) -> [count, created]
        self._errors: dict[tuple[str, str], list] = {}     # (action, code) -> [count, created]
        self._latency: dict[str, _Latency] = {}
        self._ok: dict[str, tuple[list, _Latency]] = {}    # action -> its "ok" count and latency
        self.registry.register(_RequestCollector(self))
        self.registry.register(_QueueCollector(stats, waiting))
        self.registry.register(_GcCollector())
        if cluster is not None:
            self.registry.register(_ClusterCollector(cluster))
            self.registry.register(_ReplicationCollector(cluster))
        if journal is not None:
            self.registry.register(_JournalCollector(journal))

    def observe(self, action: str, outcome: str, seconds: float, code: str | None = None) -> None:
        c = self._requests.get((action, outcome))
        if c is None:
            self._requests[(action, outcome)] = [1, time.time()]
        else:
            c[0] += 1
        h = self._latency.get(action)
        if h is None:
            h = self._latency[action] = _Latency()
        h.buckets[_bisect_left(_BUCKETS, seconds)] += 1   # the first bucket with seconds <= le
        h.sum += seconds
        if code is not None:
            c = self._errors.get((action, code))
            if c is None:
                self._errors[(action, code)] = [1, time.time()]
            else:
                c[0] += 1

    def observe_ok(self, action: str, seconds: float) -> None:
        """``observe(action, "ok", seconds)``, the common case, with one dict lookup."""
        cells = self._ok.get(action)
        if cells is None:
            self.observe(action, "ok", seconds)
            self._ok[action] = (self._requests[(action, "ok")], self._latency[action])
            return
        count, h = cells
        count[0] += 1
        h.buckets[_bisect_left(_BUCKETS, seconds)] += 1
        h.sum += seconds

    def request_counts(self) -> dict[tuple[str, str], int]:
        """SQS requests answered so far, by (action, outcome)."""
        return {key: c[0] for key, c in list(self._requests.items())}

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _counter(name: str, doc: str, labels: tuple[str, str], counts: dict, created: bool) -> Metric:
    """A labelled counter family from ``{(label values): (count, created time)}``."""
    fam = Metric(name, doc, "counter")
    for key, (n, t) in list(counts.items()):
        values = dict(zip(labels, key))
        fam.add_sample(f"{name}_total", values, float(n))
        if created:
            fam.add_sample(f"{name}_created", values, t)
    return fam
