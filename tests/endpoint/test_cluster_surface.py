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
from elasticmq_py import cli
from elasticmq_py.admin import ClusterAdmin
from elasticmq_py.config import Config, ConfigError
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
])
def test_cluster_section_errors(tmp_path, change, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, change(CLUSTER_TOML))


class _FakeMembers:
    def __init__(self):
        self.calls = []

    async def step_down(self):
        self.calls.append("step-down")
        return True

    async def add_member(self, spec):
        self.calls.append(("add", spec))

    async def remove_member(self, name):
        self.calls.append(("remove", name))

    def cluster_status(self):
        return {"master": "n1"}


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
    for cmd in ("serve", "status", "step-down", "members"):
        assert cmd in out


def test_cli_needs_a_secret_for_mutations(monkeypatch, capsys):
    monkeypatch.delenv(cli.SECRET_ENV, raising=False)
    assert cli.main(["step-down", "--endpoint", "http://127.0.0.1:9"]) == 1
    assert "secret is needed" in capsys.readouterr().err
