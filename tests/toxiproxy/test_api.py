"""Every endpoint of the Toxiproxy HTTP API, through the unmodified toxiproxy-python client
(its objects where it has them, its APIConsumer for the routes it has no method for)."""

from __future__ import annotations

import json
import socket

import pytest
from toxiproxy.exceptions import InvalidToxic, NotFound, ProxyExists
from toxiproxy.proxy import Proxy

from tests.toxiproxy.upstreams import Upstream, connect, echo, host_port, read_until_closed, roundtrip


def _error(exc: Exception) -> dict:
    body = json.loads(exc.args[0])
    assert set(body) >= {"error", "status"}
    return body


def test_version_and_running(toxiproxy):
    assert toxiproxy.running()
    raw = toxiproxy.version()
    try:
        version = json.loads(raw)["version"]  # {"version": "2.x.y"} since Toxiproxy 2.1
    except ValueError:
        version = raw.decode().strip()  # older servers answer in plain text
    assert isinstance(version, str) and version[:1].isdigit()


def test_create_list_show_destroy(toxiproxy, echo_upstream, name, api):
    p = toxiproxy.create(upstream=echo_upstream.address, name=name, listen="127.0.0.1:0")
    assert isinstance(p, Proxy)
    assert p.name == name and p.upstream == echo_upstream.address and p.enabled is True
    host, port = host_port(p.listen)
    assert host == "127.0.0.1" and port != 0  # the bound address, not the requested :0

    listed = toxiproxy.proxies()
    assert name in listed and listed[name].listen == p.listen
    assert toxiproxy.get_proxy(name).upstream == echo_upstream.address

    shown = api.get(f"/proxies/{name}").json()
    assert shown == {"name": name, "listen": p.listen, "upstream": echo_upstream.address,
                     "enabled": True, "toxics": []}

    with connect(p.listen) as s:
        assert roundtrip(s, b"hello") < 1.0

    assert toxiproxy.destroy(p) is True
    assert toxiproxy.get_proxy(name) is None
    with pytest.raises(NotFound) as e:
        api.get(f"/proxies/{name}")
    assert _error(e.value) == {"error": "proxy not found", "status": 404}
    with pytest.raises(NotFound):
        api.delete(f"/proxies/{name}")
    with pytest.raises(OSError):
        socket.create_connection(host_port(p.listen), timeout=1).close()


def test_create_disabled_and_duplicate(toxiproxy, echo_upstream, name, api):
    p = toxiproxy.create(upstream=echo_upstream.address, name=name, listen="127.0.0.1:0",
                         enabled=False)
    assert p.enabled is False
    with pytest.raises(ProxyExists):  # the client's own check
        toxiproxy.create(upstream=echo_upstream.address, name=name)
    with pytest.raises(ProxyExists) as e:  # the server's 409
        api.post("/proxies", json={"name": name, "upstream": echo_upstream.address,
                                   "listen": "127.0.0.1:0"})
    assert _error(e.value) == {"error": "proxy already exists", "status": 409}


def test_bad_requests(toxiproxy, echo_proxy, api):
    with pytest.raises(InvalidToxic) as e:
        api.post("/proxies", json={"name": "no_upstream", "listen": "127.0.0.1:0"})
    assert _error(e.value)["status"] == 400
    assert "upstream" in _error(e.value)["error"]
    with pytest.raises(InvalidToxic) as e:
        api.post("/proxies", json={"upstream": "127.0.0.1:1", "listen": "127.0.0.1:0"})
    assert "name" in _error(e.value)["error"]
    with pytest.raises(InvalidToxic) as e:
        api.post("/proxies", data="{not json", headers={"Content-Type": "application/json"})
    assert _error(e.value)["error"].startswith("bad request body")

    with pytest.raises(InvalidToxic) as e:
        echo_proxy.add_toxic(type="no_such_toxic")
    assert _error(e.value) == {"error": "invalid toxic type", "status": 400}
    with pytest.raises(InvalidToxic) as e:
        echo_proxy.add_toxic(type="latency", stream="sideways")
    assert _error(e.value)["status"] == 400 and "stream" in _error(e.value)["error"]
    with pytest.raises(InvalidToxic):
        echo_proxy.add_toxic(type="latency", attributes={"latency": "slow"})
    with pytest.raises(NotFound) as e:
        api.post("/proxies/nope/toxics", json={"type": "latency"})
    assert _error(e.value) == {"error": "proxy not found", "status": 404}
    with pytest.raises(NotFound):
        api.get("/proxies/nope/toxics")
    assert echo_proxy.toxics() == {}


def test_toxics_crud(toxiproxy, echo_proxy, api):
    p = echo_proxy
    p.add_toxic(type="latency", attributes={"latency": 100})
    p.add_toxic(type="bandwidth", name="bw", stream="upstream", toxicity=0.5,
                attributes={"rate": 1000})
    toxics = p.toxics()
    assert set(toxics) == {"latency_downstream", "bw"}
    lat = p.get_toxic("latency_downstream")
    assert (lat.type, lat.stream, lat.toxicity) == ("latency", "downstream", 1.0)
    assert lat.attributes == {"latency": 100, "jitter": 0}
    bw = toxics["bw"]
    assert (bw.type, bw.stream, bw.toxicity, bw.attributes) == ("bandwidth", "upstream", 0.5,
                                                                {"rate": 1000})
    assert p.get_toxic("missing") is None

    # The proxy's JSON lists its toxics (upstream chain first, as the Go server does).
    shown = api.get(f"/proxies/{p.name}").json()
    assert [t["name"] for t in shown["toxics"]] == ["bw", "latency_downstream"]

    # 409 for a second toxic of the same name.
    with pytest.raises(ProxyExists) as e:
        p.add_toxic(type="latency", attributes={"latency": 5})
    assert _error(e.value) == {"error": "toxic already exists", "status": 409}

    # Show and update one toxic (routes the client has no method for).
    assert api.get(f"/proxies/{p.name}/toxics/bw").json() == {
        "attributes": {"rate": 1000}, "name": "bw", "type": "bandwidth", "stream": "upstream",
        "toxicity": 0.5}
    updated = api.post(f"/proxies/{p.name}/toxics/latency_downstream",
                       json={"attributes": {"jitter": 7}, "toxicity": 0.25}).json()
    assert updated["attributes"] == {"latency": 100, "jitter": 7} and updated["toxicity"] == 0.25
    with pytest.raises(NotFound) as e:
        api.get(f"/proxies/{p.name}/toxics/missing")
    assert _error(e.value) == {"error": "toxic not found", "status": 404}
    with pytest.raises(NotFound):
        api.post(f"/proxies/{p.name}/toxics/missing", json={"toxicity": 1})

    assert p.destroy_toxic("bw") is True
    assert set(p.toxics()) == {"latency_downstream"}
    with pytest.raises(NotFound):
        p.destroy_toxic("bw")

    # Every toxic type is accepted with its attributes echoed back.
    for toxic_type, attrs in [("timeout", {"timeout": 10}), ("reset_peer", {"timeout": 10}),
                              ("slicer", {"average_size": 4, "size_variation": 2, "delay": 5}),
                              ("limit_data", {"bytes": 9}), ("slow_close", {"delay": 3})]:
        p.add_toxic(type=toxic_type, stream="upstream", attributes=attrs)
        assert p.get_toxic(f"{toxic_type}_upstream").attributes == attrs


def test_update_listen_and_upstream(toxiproxy, echo_proxy, api, name):
    other = Upstream(echo)
    try:
        old_listen = echo_proxy.listen
        with connect(old_listen) as s:
            roundtrip(s)
            moved = api.post(f"/proxies/{name}", json={"listen": "127.0.0.1:0",
                                                       "upstream": other.address}).json()
            # The old listener and its connections are gone.
            assert read_until_closed(s)[1] in ("eof", "reset")
        assert moved["upstream"] == other.address and moved["enabled"] is True
        assert moved["listen"] != old_listen and not moved["listen"].endswith(":0")
        with connect(moved["listen"]) as s:
            assert roundtrip(s, b"moved") < 1.0
        assert toxiproxy.get_proxy(name).upstream == other.address
    finally:
        other.close()


def test_populate(toxiproxy, echo_upstream, name, api):
    # The client's populate (create or replace, client-side) ...
    made = toxiproxy.populate([{"name": name, "upstream": echo_upstream.address,
                                "listen": "127.0.0.1:0"}])
    assert [p.name for p in made] == [name]
    # ... and the server's POST /populate.
    resp = api.post("/populate", json=[
        {"name": name, "upstream": echo_upstream.address, "listen": made[0].listen},
        {"name": name + "_b", "upstream": echo_upstream.address, "listen": "127.0.0.1:0",
         "enabled": False},
    ])
    assert resp.status_code == 201
    body = resp.json()["proxies"]
    assert [(p["name"], p["enabled"]) for p in body] == [(name, True), (name + "_b", False)]
    assert body[0]["listen"] == made[0].listen  # unchanged proxies are kept as they are
    with pytest.raises(InvalidToxic):
        api.post("/populate", json=[{"name": "x"}])


def test_disable_drops_live_connections_and_refuses_new(toxiproxy, echo_proxy):
    p = echo_proxy
    s = connect(p.listen)
    roundtrip(s)
    p.disable()
    assert toxiproxy.get_proxy(p.name).enabled is False
    assert read_until_closed(s)[1] in ("eof", "reset")
    s.close()
    with pytest.raises(OSError):
        socket.create_connection(host_port(p.listen), timeout=1).close()
    p.enable()
    with connect(p.listen) as s2:  # same address again
        assert roundtrip(s2) < 1.0


def test_down_context_manager(toxiproxy, echo_proxy):
    with echo_proxy.down():
        with pytest.raises(OSError):
            socket.create_connection(host_port(echo_proxy.listen), timeout=1).close()
    with connect(echo_proxy.listen) as s:
        assert roundtrip(s) < 1.0


def test_reset_enables_and_removes_toxics(toxiproxy, echo_proxy):
    p = echo_proxy
    p.add_toxic(type="latency", attributes={"latency": 1000})
    p.add_toxic(type="timeout", stream="upstream", attributes={"timeout": 0})
    p.disable()
    assert toxiproxy.reset() is True
    again = toxiproxy.get_proxy(p.name)
    assert again.enabled is True
    assert again.toxics() == {}
    with connect(p.listen) as s:
        assert roundtrip(s) < 0.5


def test_many_proxies(toxiproxy, echo_upstream, name):
    proxies = [toxiproxy.create(upstream=echo_upstream.address, name=f"{name}_{i}",
                                listen="127.0.0.1:0") for i in range(20)]
    socks = [connect(p.listen) for p in proxies]
    try:
        for i, s in enumerate(socks):
            assert roundtrip(s, b"x%d" % i) < 1.0
        assert {p.name for p in proxies} <= set(toxiproxy.proxies())
    finally:
        for s in socks:
            s.close()
    toxiproxy.destroy_all()
    assert toxiproxy.proxies() == {}


def test_upstream_unreachable_closes_client(toxiproxy, name):
    with socket.socket() as tmp:
        tmp.bind(("127.0.0.1", 0))
        dead = f"127.0.0.1:{tmp.getsockname()[1]}"  # bound, never listening: refused
        p = toxiproxy.create(upstream=dead, name=name, listen="127.0.0.1:0")
        with connect(p.listen) as s:
            assert read_until_closed(s)[1] in ("eof", "reset")


def test_listen_conflict_is_an_error_and_creates_nothing(toxiproxy, echo_proxy, api, name):
    resp = api.post("/proxies", json={"name": name + "_clash", "upstream": echo_proxy.upstream,
                                      "listen": echo_proxy.listen})
    assert resp.status_code == 500
    assert resp.json()["status"] == 500 and resp.json()["error"]
    assert toxiproxy.get_proxy(name + "_clash") is None


def test_empty_stream_is_invalid(echo_proxy, api):
    with pytest.raises(InvalidToxic):
        api.post(f"/proxies/{echo_proxy.name}/toxics", json={"type": "latency", "stream": ""})
