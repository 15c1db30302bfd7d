"""/health's decision (elasticmq_py/health.py) for every kind of member, and the route on a single
node. The same answers from real cluster processes: tests/cluster/test_servers.py (forwarding
members, kill -9, SIGSTOP) and tests/cluster/test_replication.py (forward = false)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from elasticmq_py.health import NodeFacts, Role, Serves, judge
from elasticmq_py.server import Server

REPLICA = NodeFacts("n2", serving=False, why_not="Node n2 is not the master (the master is n1).", forward=True,
                    master="n1", master_linked=True, master_heard=True)


def _facts(**kw) -> NodeFacts:
    d = {f: getattr(REPLICA, f) for f in NodeFacts.__slots__}
    d.update(kw)
    return NodeFacts(**d)


@pytest.mark.parametrize("facts, ok_any, serves, reason_has", [
    (_facts(node="n1", serving=True, why_not=""), True, Serves.ITSELF, "is the active master"),
    (REPLICA, True, Serves.FORWARDING, "forwards client calls to the active master n1"),
    (_facts(forward=False), False, Serves.NO, "Forwarding is off"),
    (_facts(master_linked=False), False, Serves.NO, "cannot reach the master n1"),
    (_facts(master_heard=False), False, Serves.NO, "has not heard from the master n1"),
    (_facts(master=None, why_not="Node n2 has not joined a view of the cluster yet."), False, Serves.NO,
     "has not joined a view"),
    # the master of the view, still synchronising: it neither serves nor has anyone to forward to
    (_facts(node="n1", why_not="Node n1 is the new master and is synchronising with a majority of the members."),
     False, Serves.NO, "synchronising"),
])
def test_health_of_each_kind_of_member(facts, ok_any, serves, reason_has):
    h = judge(facts, Role.ANY)
    assert (h.ok, h.serves, h.status_code) == (ok_any, serves, 200 if ok_any else 503)
    assert reason_has in h.reason and h.node == facts.node and h.master == facts.master
    m = judge(facts, Role.MASTER)
    assert m.ok is facts.serving and m.status_code == (200 if facts.serving else 503)
    if not facts.serving:
        assert facts.why_not in m.reason and m.serves is Serves.NO


def test_role_parameter():
    assert Role.parse(None) is Role.ANY and Role.parse("") is Role.ANY and Role.parse("any") is Role.ANY
    assert Role.parse("master") is Role.MASTER
    with pytest.raises(ValueError, match="unknown role 'leader'"):
        Role.parse("leader")


def _get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_single_node_is_healthy_and_its_own_master():
    with Server(port=0) as s:
        code, doc = _get(s.endpoint_url + "/health")
        assert code == 200 and doc["status"] == "ok" and doc["serves"] == "itself" and doc["role"] == "any"
        code, doc = _get(s.endpoint_url + "/health?role=master")
        assert code == 200 and doc["role"] == "master" and doc["master"] == doc["node"]
        code, doc = _get(s.endpoint_url + "/health?role=primary")
        assert code == 400 and "unknown role 'primary'" in doc["error"]
