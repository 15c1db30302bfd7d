"""The [cluster] configuration section, the admin routes' access checks, and the single-node
answers of the cluster surface (no processes: the multi-process tests are in tests/cluster)."""

from __future__ import annotations

import asyncio
import json
import textwrap
import urllib.error
import urllib.request

import pytest

from cluster.config import Address, NodeSpec
from cluster.status import GroupInfo, NodeStatus
from elasticmq_py import cli
from elasticmq_py.admin import ClusterAdmin
from elasticmq_py.config import Config, ConfigError, server_toml
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.server import Server

CLUSTER_TOML = """
node-name = "n2"
[cluster]
name = "orders"
secret = "s3"
history = "n2.jsonl"
admin-from = ["10.0.0.0/8"]
[[cluster.nodes]]
name = "n1"
raft = "127.0.0.1:20001"
stream = "127.0.0.1:20101"
[[cluster.nodes]]
name = "n2"
raft = "127.0.0.1:20002"
[cluster.links."n2->n1"]
raft = "127.0.0.1:25021"
[cluster.timing]
lease = 0.12
"""


def _load(tmp_path, text: str) -> Config:
    p = tmp_path / "c.toml"
    p.write_text(textwrap.dedent(text))
    return Config.from_toml(p)


def test_cluster_section_uses_cluster_config_types(tmp_path):
    cfg = _load(tmp_path, CLUSTER_TOML)
    node = cfg.cluster
    assert node.self_name == "n2" and cfg.node_name == "n2"
    assert node.cluster.name == "orders" and node.cluster.secret == "s3"
    assert node.cluster.node("n1") == NodeSpec("n1", Address("127.0.0.1", 20001), Address("127.0.0.1", 20101))
    assert node.cluster.dial_raft("n2", "n1") == Address("127.0.0.1", 25021)
    assert node.timing.lease == 0.12
    assert node.history_path == str(tmp_path / "n2.jsonl")  # relative to the config file
    assert cfg.admin_from == ("10.0.0.0/8",)


def test_links_are_encrypted_unless_the_cluster_section_says_otherwise(tmp_path):
    assert _load(tmp_path, CLUSTER_TOML).cluster.cluster.encrypt_links is True
    off = CLUSTER_TOML.replace('secret = "s3"', 'secret = "s3"\nencrypt-links = false')
    node = _load(tmp_path, off).cluster
    assert node.cluster.encrypt_links is False
    again = _load(tmp_path, server_toml(node, host="127.0.0.1", port=0)).cluster
    assert again.cluster.encrypt_links is False, "the written [cluster] keeps the setting"


def test_groups_come_from_the_cluster_section_and_are_written_back(tmp_path):
    assert _load(tmp_path, CLUSTER_TOML).cluster.cluster.groups == 1
    node = _load(tmp_path, CLUSTER_TOML.replace('secret = "s3"', 'secret = "s3"\ngroups = 3')).cluster
    assert node.cluster.groups == 3
    assert _load(tmp_path, server_toml(node, host="127.0.0.1", port=0)).cluster.cluster.groups == 3


def test_without_cluster_section_nothing_changes(tmp_path):
    cfg = _load(tmp_path, 'port = 1234\n')
    assert cfg.cluster is None and cfg.admin_from == ("127.0.0.1/32", "::1/128")


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace('name = "orders"', 'name = "orders"\nbogus = 1'), "unknown key"),
    (lambda t: t.replace('secret = "s3"', ''), "secret"),
    (lambda t: t.replace('node-name = "n2"', 'node-name = "n9"'), "not one of the nodes"),
    (lambda t: t.replace('[cluster]\n', '[cluster]\nself = "n1"\n'), "contradicts"),
    (lambda t: t.replace('lease = 0.12', 'lease = 0.5'), "unsafe"),
    (lambda t: t.replace('raft = "127.0.0.1:20002"', 'raft = "nowhere"'), "host:port"),
    (lambda t: t.replace('["10.0.0.0/8"]', '["not-an-address"]'), "admin-from"),
    (lambda t: t.replace('secret = "s3"', 'secret = "s3"\nencrypt-links = "no"'), "encrypt-links must be true or false"),
    (lambda t: t.replace('secret = "s3"', 'secret = "s3"\nencrypt-link = false'), "unknown key"),
    (lambda t: t.replace('secret = "s3"', 'secret = "s3"\ngroups = 0'), "groups must be a whole number"),
])
def test_cluster_section_errors(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, change(CLUSTER_TOML))


class _FakeMembers:
    def __init__(self):
        self.calls = []

    async def step_down(self, to=None):
        self.calls.append("step-down" if to is None else ("step-down", to))
        return True

    async def add_member(self, spec):
        self.calls.append(("add", spec))

    async def remove_member(self, name):
        self.calls.append(("remove", name))

    def status(self):
        return NodeStatus(node="n2", master="n1")


def _admin_call(admin, method, path, peer, secret=None, body=b""):
    headers = {"x-cluster-secret": secret} if secret is not None else {}
    return asyncio.run(admin.handle(HttpRequest(method, path, b"", headers, body, peer=peer)))


def test_admin_routes_check_source_and_secret():
    fake = _FakeMembers()
    admin = ClusterAdmin(fake, "s3", ("127.0.0.1/32", "::1/128"))
    assert _admin_call(admin, "POST", "/cluster/step-down", "10.1.2.3", "s3").status == 403
    assert _admin_call(admin, "POST", "/cluster/step-down", None, "s3").status == 403
    assert _admin_call(admin, "POST", "/cluster/step-down", "127.0.0.1").status == 401
    assert _admin_call(admin, "POST", "/cluster/step-down", "127.0.0.1", "s4").status == 401
    assert fake.calls == []
    assert _admin_call(admin, "POST", "/cluster/step-down", "::ffff:127.0.0.1", "s3").status == 200
    r = _admin_call(admin, "POST", "/cluster/members", "::1", "s3",
                    json.dumps({"name": "n4", "raft": "127.0.0.1:1", "stream": "127.0.0.1:2"}).encode())
    assert r.status == 200 and json.loads(r.body) == {"added": "n4"}
    assert _admin_call(admin, "POST", "/cluster/members", "::1", "s3", b'{"name": "n4"}').status == 400
    assert _admin_call(admin, "DELETE", "/cluster/members/n4", "127.0.0.1", "s3").status == 200
    assert _admin_call(admin, "GET", "/cluster/members/n4", "127.0.0.1", "s3").status == 405
    assert fake.calls[-1] == ("remove", "n4") and fake.calls[0] == "step-down"
    wide = ClusterAdmin(fake, "s3", ("0.0.0.0/0",))
    assert _admin_call(wide, "POST", "/cluster/step-down", "10.1.2.3", "s3").status == 200
    r = _admin_call(wide, "POST", "/cluster/step-down", "127.0.0.1", "s3", b'{"to": "n2"}')
    assert r.status == 200 and json.loads(r.body) == {"stepped_down": True, "to": "n2"}
    assert fake.calls[-1] == ("step-down", "n2")
    assert _admin_call(wide, "POST", "/cluster/step-down", "127.0.0.1", "s3", b'{"to": 2}').status == 400
    assert _admin_call(wide, "POST", "/cluster/step-down", "127.0.0.1", "s3", b'not json').status == 400
    assert fake.calls[-1] == ("step-down", "n2"), "a bad body does nothing"


class _FakeGroupMember(_FakeMembers):
    """n2 of three groups, master of group 1; a step-down of group 1 moves it to n3."""

    def __init__(self):
        super().__init__()
        self.masters = ["n1", "n2", "n3"]

    async def step_down(self, to=None, group=None):
        self.calls.append(("step-down", to, group))
        if group != 1 or self.masters[1] != "n2" or to not in (None, "n3"):
            return False
        self.masters[1] = "n3"
        return True

    def status(self):
        return NodeStatus(node="n2", master="n1", groups=tuple(
            GroupInfo(g, m, 1, 0, None, m == "n2") for g, m in enumerate(self.masters)))


def test_step_down_of_one_group_hands_it_over_or_names_its_master():
    fake = _FakeGroupMember()
    admin = ClusterAdmin(fake, "s3", ("127.0.0.1/32",))

    def step_down(body):
        r = _admin_call(admin, "POST", "/cluster/step-down", "127.0.0.1", "s3", json.dumps(body).encode())
        return r.status, json.loads(r.body)

    # a group this node does not master: the answer a non-master's step-down gets, with the
    # group's master to send it to
    status, reply = step_down({"group": 0})
    assert status == 409 and reply["master"] == "n1" and "not the master of group 0" in reply["error"]
    status, reply = step_down({"group": 1, "to": "n1"})
    assert status == 409 and reply["master"] == "n2" and "n1 is no other member connected" in reply["error"]
    assert step_down({"group": 1, "to": "n3"}) == (200, {"stepped_down": True, "group": 1, "to": "n3"})
    assert fake.calls == [("step-down", None, 0), ("step-down", "n1", 1), ("step-down", "n3", 1)]
    for bad in ({"group": 3}, {"group": -1}, {"group": "1"}, {"group": True}):
        status, reply = step_down(bad)
        assert status == 400 and reply == {"error": '"group" is a group of this cluster: 0 to 2'}
    assert len(fake.calls) == 3, "a bad group does nothing"

    # one group: group 0 is the whole cluster's step-down, any other is no group of it
    one = _FakeMembers()
    admin = ClusterAdmin(one, "s3", ("127.0.0.1/32",))
    assert step_down({"group": 0, "to": "n1"}) == (200, {"stepped_down": True, "to": "n1"})
    assert step_down({"group": 1})[0] == 400
    assert one.calls == [("step-down", "n1")]


def test_cli_step_down_sends_the_group_and_the_target(monkeypatch, capsys):
    sent = []

    def call(args, method, path, body=None, secret=None):
        sent.append((method, path, body, secret))
        return 200, {"stepped_down": True, "group": 2, "to": "n1"}

    monkeypatch.setattr(cli, "_call", call)
    assert cli.main(["step-down", "--group", "2", "--to", "n1", "--secret", "s"]) == 0
    assert sent == [("POST", "/cluster/step-down", {"to": "n1", "group": 2}, "s")]
    assert capsys.readouterr().out == "stepped down: n1 takes over as master of group 2\n"


def test_single_node_server_has_no_cluster_admin(capsys):
    with Server(port=0) as s:
        req = urllib.request.Request(s.endpoint_url + "/cluster/step-down", data=b"", method="POST")
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(req)
        assert ei.value.code == 404
        with urllib.request.urlopen(s.endpoint_url + "/health") as r:
            assert r.status == 200
        assert cli.main(["status", "--endpoint", s.endpoint_url]) == 0
        out = capsys.readouterr().out
        assert "ACTIVE" in out and "replication disabled" in out
        assert cli.main(["step-down", "--endpoint", s.endpoint_url, "--secret", "x"]) == 1


def test_cli_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for cmd in ("serve", "status", "step-down", "members", "local-cluster"):
        assert cmd in out


def test_cli_needs_a_secret_for_mutations(monkeypatch, capsys):
    monkeypatch.delenv(cli.SECRET_ENV, raising=False)
    assert cli.main(["step-down", "--endpoint", "http://127.0.0.1:9"]) == 1
    assert "secret is needed" in capsys.readouterr().err


# --- replication in `status` and /metrics --------------------------------------------------------

REPLICATION = {
    "enabled": True, "policy": "majority", "forward": True, "role": "master", "serving": True, "epoch": 4,
    "master": "n1",
    "log": {"first_seq": 101, "last_seq": 1234, "last_epoch": 4, "entries": 1134, "bytes": 3 * 1024 * 1024},
    "applied_seq": 1234, "throttling": False, "halted": True, "delay_ms": 1520, "replication_queue": 7,
    "rejected_frames": 2,
    "replicas": {
        "n3": {"connected": False, "acked_seq": 90, "lag_batches": 1144, "lag_ms": 1520, "needs_transfer": True},
        "n2": {"connected": True, "acked_seq": 1234, "lag_batches": 0, "lag_ms": 0, "needs_transfer": False},
    },
    "last_transfer": {"direction": "sent", "peer": "n3", "at": 1_700_000_000.0, "records": 100_000,
                      "bytes": 12_345_678, "duration_s": 0.84, "at_seq": 1200},
}

MASTER_STATUS = {"node": "n1", "cluster": "orders", "role": "leader", "active": True, "quorum": True,
                 "view": {"view_id": 3, "master": "n1", "epoch": 4, "members": ["n1", "n2", "n3"]},
                 "replication": REPLICATION}


def test_status_table_shows_replication():
    out = cli.format_status(NodeStatus.from_dict(MASTER_STATUS), now=1_700_000_035.0)
    lines = out.splitlines()
    assert ("replication enabled   policy majority   forwarding on   role master   serving yes   "
            "epoch 4   master n1") in lines
    assert any("halted yes" in ln and "throttling no" in ln and "delay 1520 ms" in ln and "queue 7 ops" in ln
               and "rejected frames 2" in ln for ln in lines), out
    assert any("log entries 1134" in ln and "size 3.0 MiB" in ln and "seq 101..1234" in ln for ln in lines), out
    header = next(i for i, ln in enumerate(lines) if ln.startswith("replica "))
    assert lines[header].split() == ["replica", "connected", "acked", "seq", "lag", "batches", "lag", "ms",
                                     "needs", "transfer"]
    assert lines[header + 1].split() == ["n2", "yes", "1234", "0", "0", "no"]
    assert lines[header + 2].split() == ["n3", "no", "90", "1144", "1520", "yes"]
    transfer = next(ln for ln in lines if ln.startswith("last transfer"))
    assert "sent to n3" in transfer and "(35s ago)" in transfer and "100000 records" in transfer
    assert "11.8 MiB in 0.84s" in transfer and "up to seq 1200" in transfer


def test_status_table_on_a_replica_and_with_fields_missing():
    st = dict(MASTER_STATUS, node="n2", active=False,
              replication={"enabled": True, "role": "replica", "master": "n1", "serving": True, "halted": False,
                           "applied_seq": 77, "log": {"first_seq": 1, "last_seq": 77, "entries": 77, "bytes": 900},
                           "replicas": {}, "last_transfer": {"direction": "received", "peer": "n1",
                                                             "at": 1_700_000_000.0}})
    out = cli.format_status(NodeStatus.from_dict(st), now=1_700_000_001.0)
    assert "role replica" in out and "applied seq 77" in out and "size 900 B" in out
    assert not any(ln.startswith("replica ") for ln in out.splitlines()), "no per-replica table on a replica"
    assert "last transfer  received from n1" in out and "None" not in out
    assert "amnesiac" not in out
    st["replication"] = dict(st["replication"], amnesiac=True)
    assert "amnesiac yes (restarted empty" in cli.format_status(NodeStatus.from_dict(st), now=1_700_000_001.0)
    bare = cli.format_status(NodeStatus.from_dict({"node": "n2", "replication": {"enabled": True}}))
    section = bare[bare.index("replication enabled"):]
    assert section.splitlines() == ["replication enabled   master -", "", "last transfer  none"]


def test_status_table_without_replication_is_unchanged():
    for repl in ({"enabled": False}, None):
        st = dict(MASTER_STATUS, replication=repl)
        out = cli.format_status(NodeStatus.from_dict(st))
        assert out.endswith("\n\nreplication disabled")
        assert out == cli.format_status(NodeStatus.from_dict(dict(MASTER_STATUS, replication={"enabled": False})))
        assert not any(ln.startswith("replica ") for ln in out.splitlines()) and "last transfer" not in out


def _scrape(status: dict) -> dict[tuple[str, tuple], float]:
    from prometheus_client.parser import text_string_to_metric_families

    from elasticmq_py.metrics import Metrics

    text = Metrics(lambda: {}, lambda: 0, cluster=lambda: NodeStatus.from_dict(status)).render().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_metrics_replication_gauges():
    m = _scrape(MASTER_STATUS)
    expect = {
        "enabled": 1, "serving": 1, "halted": 1, "throttling": 0, "delay_seconds": 1.52, "queue_ops": 7,
        "log_last_seq": 1234, "log_entries": 1134, "log_bytes": 3 * 1024 * 1024,
    }
    for name, value in expect.items():
        assert m[(f"elasticmq_replication_{name}", ())] == pytest.approx(value), name
    per_replica = {"replica_connected": (1, 0), "replica_acked_seq": (1234, 90),
                   "replica_lag_batches": (0, 1144), "replica_lag_seconds": (0, 1.52)}
    for name, (n2, n3) in per_replica.items():
        assert m[(f"elasticmq_replication_{name}", (("replica", "n2"),))] == pytest.approx(n2), name
        assert m[(f"elasticmq_replication_{name}", (("replica", "n3"),))] == pytest.approx(n3), name
    transfer = (("direction", "sent"), ("peer", "n3"))
    assert m[("elasticmq_replication_last_transfer_records", transfer)] == 100_000
    assert m[("elasticmq_replication_last_transfer_bytes", transfer)] == 12_345_678
    assert m[("elasticmq_replication_last_transfer_duration_seconds", transfer)] == pytest.approx(0.84)
    assert m[("elasticmq_replication_last_transfer_timestamp_seconds", transfer)] == 1_700_000_000.0
    assert m[("elasticmq_cluster_active", ())] == 1, "the membership gauges are still there"


def test_metrics_replica_node_and_disabled_replication():
    replica = dict(MASTER_STATUS, replication={"enabled": True, "role": "replica", "serving": False,
                                               "halted": False, "replicas": {}, "last_transfer": None})
    m = _scrape(replica)
    assert m[("elasticmq_replication_serving", ())] == 0
    assert not any(name.startswith(("elasticmq_replication_replica_", "elasticmq_replication_last_transfer"))
                   for name, _ in m)
    assert ("elasticmq_replication_delay_seconds", ()) not in m, "not reported, so not made up as 0"
    for repl in ({"enabled": False}, None):
        m = _scrape(dict(MASTER_STATUS, replication=repl))
        assert not any(name.startswith("elasticmq_replication_") for name, _ in m)
        assert m[("elasticmq_cluster_active", ())] == 1


def test_status_table_shows_the_journal_of_a_node_with_a_data_dir():
    journal = {"data_dir": "/var/lib/n1", "fsync": "always", "bytes": 3 * 1024 * 1024, "segments": 2,
               "last_seq": 900, "durable_seq": 900, "fsyncs": 1234, "fsyncs_per_s": 410.5,
               "fsync_ms_last": 0.21, "fsync_ms_avg": 0.18, "entries_per_fsync": 1.4, "queue_depth": 0,
               "last_snapshot": {"at_seq": 700, "end_seq": 720, "bytes": 2 * 1024 * 1024, "duration_s": 0.41,
                                 "finished_at": 1_700_000_000.0},
               "recovery": {"seconds": 1.25, "messages": 5000, "entries": 12, "snapshot_seq": 650,
                            "truncated": None}}
    out = cli.format_status(NodeStatus.from_dict(dict(MASTER_STATUS, journal=journal)), now=1_700_000_010.0)
    lines = out.splitlines()
    assert lines[-4].startswith("journal        data-dir /var/lib/n1   fsync always   size 3.0 MiB   segments 2")
    assert "fsyncs 1234   per s 410.5   last 0.21 ms   avg 0.18 ms   entries per fsync 1.4" in lines[-3]
    assert lines[-2].startswith("last snapshot  ") and "(10s ago): 2.0 MiB in 0.41s, seq 700..720" in lines[-2]
    assert lines[-1] == "recovered      5000 messages in 1.25s (snapshot at seq 650, 12 entries replayed)"
    failed = dict(journal, error="OSError: [Errno 28] No space left on device")
    assert "FAILED: OSError: [Errno 28] No space left on device" in cli.format_status(
        NodeStatus.from_dict(dict(MASTER_STATUS, journal=failed)))
