"""/health's answers (elasticmq_py/health.py) from the node core's route, and on a single node. The
same answers from real cluster processes: tests/cluster/test_servers.py (forwarding members, kill
-9, SIGSTOP) and tests/cluster/test_replication.py (forward = false)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from cluster.node_actions import LOCAL, ForwardTo, Refuse
from elasticmq_py.health import Role, Serves, from_route
from elasticmq_py.server import Server

WHY = "Node n2 is not the master (the master is n1)."


@pytest.mark.parametrize("route, ok_any, serves, reason_has", [
    (LOCAL, True, Serves.ITSELF, "is the active master"),
    (ForwardTo("n1"), True, Serves.FORWARDING, "forwards client calls to the active master n1"),
    (Refuse("Node n2 cannot reach the master n1 (its stream link is down), so it cannot forward."), False,
     Serves.NO, "cannot reach the master n1"),
])
def test_health_says_the_cores_route(route, ok_any, serves, reason_has):
    # which route a member takes in each situation is the node core's (tests/cluster/test_node_core.py)
    h = from_route("n2", route, Role.ANY, "n1", WHY)
    assert (h.ok, h.serves, h.status_code) == (ok_any, serves, 200 if ok_any else 503)
    assert reason_has in h.reason and h.node == "n2" and h.master == "n1"
    m = from_route("n2", route, Role.MASTER, "n1", WHY)
    serving = route is LOCAL
    assert m.ok is serving and m.status_code == (200 if serving else 503)
    if not serving:
        assert WHY in m.reason and m.serves is Serves.NO


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
