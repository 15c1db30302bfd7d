"""The mutation stream over real ZeroMQ sockets on 127.0.0.1: a master and two replicas (each with
its own real Storage) on one asyncio loop, OS-chosen ports, bounded waits.

Nodes first bind port 0, then every node is given the real addresses (and the per-link dial
overrides) with ``update_config``, the way a membership change reaches a running node.
"""

from __future__ import annotations

import asyncio
import functools
import os
import socket
from typing import Any, Awaitable, Callable

import pytest
import zmq

from storage import IdSource, ManualClock, Storage
from storage.codec import encode_many
from storage.commands import CreateQueue, Namespace, SendMessage

from cluster.config import Address, ClusterConfig, LinkAddrs, NodeSpec
from cluster.replication.master import Limits
from cluster.replication.messages import AckPolicy, Batch
from cluster.replication.runtime import MasterChanged, NotServing, OutcomeUnknown, StreamNode
from cluster.replication.transport import StreamTransport, TransportTiming
from cluster.replication.wire import MAGIC, WireCodec
from tests.storage.workload import assert_same_state

FAST = TransportTiming(heartbeat=0.04, dead_after=0.3, reconnect=0.02, reconnect_max=0.1, log_every=0.0)
NAMES = ("n1", "n2", "n3")
NS = Namespace("eu-west-1", "123456789012")
SECRET = "correct horse battery staple"
LOCAL = Address("127.0.0.1", 0)


def run(coro_fn: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    """Each test on a fresh loop, with an overall bound so a hang fails instead of stalling."""
    @functools.wraps(coro_fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        return asyncio.run(asyncio.wait_for(coro_fn(*args, **kw), 20))
    return wrapper


async def eventually(pred: Callable[[], bool], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def config(bound: dict[str, Address] | None = None, links: dict | None = None, secret: str = SECRET) -> ClusterConfig:
    bound = bound or {}
    return ClusterConfig("test", secret, tuple(NodeSpec(n, Address("127.0.0.1", 1), bound.get(n, LOCAL))
                                               for n in NAMES), links=links or {})


class Cluster:
    def __init__(self, policy: AckPolicy = AckPolicy.MAJORITY) -> None:
        self.nodes = {n: StreamNode(config(), n, Storage(ManualClock(0), IdSource(i + 1)), policy=policy,
                                    transport_timing=FAST, tick=0.02, limits=Limits(resend_after_ms=100))
                      for i, n in enumerate(NAMES)}
        self.master = self.nodes["n1"]
        self.bound: dict[str, Address] = {}
        self.ops = 0

    async def start(self) -> None:
        for n, node in self.nodes.items():
            self.bound[n] = await node.start()
        for node in self.nodes.values():
            node.update_config(config(self.bound))
        for node in self.nodes.values():
            node.install_view("n1", 1, NAMES)
        await eventually(lambda: all(self.master.transport.connected(n) for n in ("n2", "n3")),
                         what="replicas connected")
        await eventually(lambda: self.master.serving, what="the master synced with a majority")

    async def stop(self) -> None:
        for node in self.nodes.values():
            await node.stop()

    def execute(self, command: Any, policy: AckPolicy | None = None) -> asyncio.Future:
        _, muts = self.master.storage.execute(command)
        self.ops += 1
        return self.master.submit(self.ops, muts, policy)

    async def converged(self, *names: str) -> None:
        want = self.master.storage.digest()
        await eventually(lambda: all(self.nodes[n].storage.digest() == want for n in names),
                         what=f"{names} converged")
        for n in names:
            assert_same_state(self.nodes[n].storage, self.master.storage)


@run
async def test_majority_completes_and_replicas_converge():
    c = Cluster()
    await c.start()
    try:
        await asyncio.wait_for(c.execute(CreateQueue(NS, "q")), 5)
        futs = [c.execute(SendMessage(NS.key("q"), f"body-{i}")) for i in range(200)]
        await asyncio.wait_for(asyncio.gather(*futs), 5)
        assert c.master.log.last_seq < 20, "group commit: the 200 sends of one loop turn share few batches"
        await c.converged("n2", "n3")
        status = c.master.status()
        assert status["role"] == "master" and status["serving"] and not status["halted"]
        for r in ("n2", "n3"):
            assert status["replicas"][r]["connected"]
        await eventually(lambda: all(r["acked_seq"] == c.master.log.last_seq
                                     for r in c.master.status()["replicas"].values()), what="all acked")
        assert c.nodes["n2"].status()["applied_seq"] == c.master.log.last_seq
        with pytest.raises(NotServing):
            c.nodes["n2"].submit(1, [], None)
    finally:
        await c.stop()


@run
async def test_with_one_replica_down_majority_completes_and_all_waits():
    c = Cluster()
    await c.start()
    try:
        await asyncio.wait_for(c.execute(CreateQueue(NS, "q"), AckPolicy.ALL), 5)
        await c.nodes["n3"].stop()
        await eventually(lambda: not c.master.transport.connected("n3"), 2, "n3 seen disconnected")
        assert c.master.status()["replicas"]["n3"]["connected"] is False
        assert c.master.status()["halted"]
        await asyncio.wait_for(c.execute(SendMessage(NS.key("q"), "m1")), 5)
        waiting_all = c.execute(SendMessage(NS.key("q"), "m2"), AckPolicy.ALL)
        await asyncio.sleep(0.5)
        assert not waiting_all.done(), "`all` must not complete while a replica of the view is down"
        await c.converged("n2")
    finally:
        await c.stop()
    with pytest.raises(OutcomeUnknown):
        waiting_all.result()


@run
async def test_frames_signed_with_another_secret_are_refused_and_counted():
    c = Cluster()
    await c.start()
    rogue = StreamTransport(config(c.bound, secret="not the secret"), "n1", on_frame=lambda *_: None,
                            timing=FAST, bind=LOCAL)
    try:
        replica = c.nodes["n2"]
        before, seq = replica.storage.digest(), replica.log.last_seq
        await rogue.start()
        other = Storage(ManualClock(0), IdSource(7))
        _, muts = other.execute(CreateQueue(NS, "evil"))
        for _ in range(3):
            rogue.send("n2", Batch(1, seq + 1, 1, encode_many(muts)))
        await eventually(lambda: replica.transport.refused.get("unauthenticated", 0) >= 3, 3, "refusals counted")
        assert replica.storage.digest() == before and replica.log.last_seq == seq
        # the real master is still served normally
        await asyncio.wait_for(c.execute(CreateQueue(NS, "good")), 5)
        await c.converged("n2", "n3")
    finally:
        await rogue.close()
        await c.stop()


@run
async def test_garbage_and_impersonation_do_not_crash_the_router():
    c = Cluster()
    await c.start()
    ctx = zmq.Context()
    d = ctx.socket(zmq.DEALER)
    try:
        target = c.bound["n2"]
        transport = c.nodes["n2"].transport
        # raw TCP garbage: libzmq's handshake fails and drops the connection
        for _ in range(3):
            with socket.create_connection((target.host, target.port), timeout=2) as s:
                s.sendall(os.urandom(4096))
        # well-formed ZMTP carrying garbage, multipart and an authentic frame under a false identity
        d.setsockopt(zmq.LINGER, 0)
        d.setsockopt(zmq.IDENTITY, b"n1")
        d.connect(f"tcp://{target.host}:{target.port}")
        d.send(os.urandom(100))
        d.send(MAGIC + b"\x02n1" + os.urandom(100))
        d.send_multipart([b"a", b"b"])
        d.send(WireCodec("test", SECRET, "n3").encode(Batch(1, 1, 1, b""), "n2"))   # identity says n1
        d.send(WireCodec("test", SECRET, "n9").encode(Batch(1, 1, 1, b""), "n2"))   # not a member
        await eventually(lambda: transport.refused.get("unauthenticated", 0) >= 1
                         and transport.refused.get("malformed", 0) >= 1
                         and transport.refused.get("identity_mismatch", 0) >= 1
                         and transport.refused.get("unknown_sender", 0) >= 1, 3, "every kind of refusal counted")
        await asyncio.wait_for(c.execute(CreateQueue(NS, "q")), 5)
        await c.converged("n2", "n3")
        assert c.nodes["n2"].log.last_seq == c.master.log.last_seq
    finally:
        d.close(0)
        ctx.term()
        await c.stop()


class Forwarder:
    """A tiny TCP forwarder that counts bytes and can be cut (connections dropped, port closed)."""

    def __init__(self, target: Address) -> None:
        self.target = target
        self.bytes = 0
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> Address:
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return Address("127.0.0.1", self.port)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            ur, uw = await asyncio.open_connection(self.target.host, self.target.port)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, uw}

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while data := await r.read(65536):
                    self.bytes += len(data)
                    w.write(data)
                    await w.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                w.transport.abort()

        await asyncio.gather(pump(reader, uw), pump(ur, writer))

    async def cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for w in self._writers:
            w.transport.abort()
        self._writers.clear()


@run
async def test_the_per_link_dial_address_is_honoured_and_a_cut_link_disconnects():
    c = Cluster()
    # the forwarder needs n2's bound port, which exists only after start: bind first, then link
    for n, node in c.nodes.items():
        c.bound[n] = await node.start()
    fwd = Forwarder(c.bound["n2"])
    fwd_addr = await fwd.start()
    cfg = config(c.bound, {("n1", "n2"): LinkAddrs(stream=fwd_addr)})
    assert cfg.dial_stream("n1", "n2") == fwd_addr and cfg.dial_stream("n3", "n2") == c.bound["n2"]
    for node in c.nodes.values():
        node.update_config(cfg)
        node.install_view("n1", 1, NAMES)
    try:
        await eventually(lambda: all(c.master.transport.connected(n) for n in ("n2", "n3")), what="connected")
        await eventually(lambda: c.master.serving, what="the master synced")
        assert c.master.transport.status()["peers"]["n2"]["dial"] == str(fwd_addr)
        carried = fwd.bytes
        await asyncio.wait_for(c.execute(CreateQueue(NS, "q"), AckPolicy.ALL), 5)
        await c.converged("n2", "n3")
        assert fwd.bytes > carried, "n1's frames to n2 went through the forwarder"
        await fwd.cut()
        await eventually(lambda: not c.master.transport.connected("n2"), 2, "n2 reported disconnected")
        status = c.master.status()
        assert status["replicas"]["n2"]["connected"] is False and status["replicas"]["n3"]["connected"] is True
        # n2 still reaches n1 directly, but no longer hears it: both ends see the link down
        await eventually(lambda: not c.nodes["n2"].transport.connected("n1"), 2, "n2 sees n1 down")
        assert c.nodes["n2"].status()["halted"]
        # majority goes on through n3
        await asyncio.wait_for(c.execute(SendMessage(NS.key("q"), "after the cut")), 5)
        await c.converged("n3")
    finally:
        await c.stop()


@run
async def test_a_new_master_serves_only_after_syncing_and_old_waiters_fail():
    c = Cluster()
    await c.start()
    try:
        await asyncio.wait_for(c.execute(CreateQueue(NS, "q"), AckPolicy.ALL), 5)
        await c.nodes["n3"].stop()
        stuck = c.execute(SendMessage(NS.key("q"), "waits for n3"), AckPolicy.ALL)
        await asyncio.sleep(0.05)
        new = c.nodes["n2"]
        served: list[tuple[bool, int]] = []
        new.on_serving = lambda on, epoch: served.append((on, epoch))
        for n in ("n1", "n2"):
            c.nodes[n].install_view("n2", 2, ("n1", "n2"))
        with pytest.raises(MasterChanged):
            await asyncio.wait_for(stuck, 1)
        assert c.nodes["n1"].role == "replica" and new.role == "master"
        await eventually(lambda: new.serving, 2, "serving after the sync with n1 (a majority of 3)")
        assert served == [(True, 2)]
        # the old master logged its staged tail before stepping down; the sync pulled it over
        assert new.log.last_seq == c.nodes["n1"].log.last_seq
        assert new.storage.digest() == c.nodes["n1"].storage.digest()
        _, muts = new.storage.execute(SendMessage(NS.key("q"), "from the new master"))
        await asyncio.wait_for(new.submit(1, muts, AckPolicy.ALL), 5)
        assert new.status()["replicas"]["n1"]["acked_seq"] == new.log.last_seq
        await eventually(lambda: c.nodes["n1"].storage.digest() == new.storage.digest(), 3, "old master follows")
        # a stale view is ignored
        new.install_view("n1", 1, NAMES)
        assert new.role == "master" and new.epoch == 2
    finally:
        await c.stop()


@run
async def test_a_new_master_without_a_majority_never_serves():
    c = Cluster()
    await c.start()
    try:
        await asyncio.wait_for(c.execute(CreateQueue(NS, "q")), 5)
        await c.nodes["n1"].stop()
        await c.nodes["n3"].stop()
        new = c.nodes["n2"]
        new.install_view("n2", 2, ("n2",))
        await asyncio.sleep(0.5)
        assert new.role == "master" and not new.serving, "one of three configured members is no majority"
        with pytest.raises(NotServing):
            new.submit(1, [], None)
    finally:
        await c.stop()


@run
async def test_a_burst_beyond_one_wake_ups_budget_is_received_whole_and_in_order():
    # The receive side drains its edge-triggered fd in bounded wake-ups (TransportTiming
    # rx_budget): what is still queued when the budget runs out must not wait for a new signal.
    got: dict[str, list] = {"a": [], "b": []}
    timing = TransportTiming(heartbeat=0.04, dead_after=0.3, reconnect=0.02, reconnect_max=0.1, log_every=0.0,
                             rx_budget=7)
    a = StreamTransport(config(), "n1", on_frame=lambda s, f: got["a"].append(f), timing=timing, bind=LOCAL)
    b = StreamTransport(config(), "n2", on_frame=lambda s, f: got["b"].append(f), timing=timing, bind=LOCAL)
    bound = {"n1": await a.start(), "n2": await b.start()}
    try:
        a.update_config(config(bound))
        b.update_config(config(bound))
        await eventually(lambda: a.connected("n2") and b.connected("n1"), what="connected")
        got["b"].clear()
        for i in range(500):   # all queued before the receiver's loop gets a turn
            assert a.send("n2", Batch(1, i + 1, 1, b"x"))
        await eventually(lambda: sum(type(f) is Batch for f in got["b"]) == 500, what="all 500 batches")
        assert [f.seq for f in got["b"] if type(f) is Batch] == list(range(1, 501))
    finally:
        await a.close()
        await b.close()
