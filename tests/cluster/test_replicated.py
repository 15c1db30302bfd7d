"""cluster/replicated.py: the node runtime on its event loop, three of them on real ZeroMQ sockets,
with Raft's side scripted (tests/cluster/scripted_raft.py): the one calling convention
(``execute(command, done)``), group commit, ack policies, liveness from heartbeats, a new master
serving only after its sync, and per-queue policies from tags."""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from storage.commands import CreateQueue, Namespace, SendMessage, SendMessageBatch, TagQueue
from storage.commands import SendMessageBatchEntry as Entry

from cluster.errors import MasterChanged, NotServing, OutcomeUnknown
from cluster.node_actions import FlushDue, ForwardTo, Local, Refuse
from cluster.queue_policies import POLICY_TAG
from cluster.replicated import ForwardError, ReplicatedStorage
from cluster.replication.messages import Ack, Forward, ForwardBatch, ForwardReplies, ForwardReply

from tests.cluster.scripted_raft import NAMES, LinkAddrs, Nodes, eventually, run
from tests.storage.workload import assert_same_state

NS = Namespace("eu-west-1", "123456789012")


def execute(node: ReplicatedStorage, command: Any) -> "asyncio.Future[Any]":
    fut = asyncio.get_running_loop().create_future()

    def done(result: Any, err: BaseException | None) -> None:
        if not fut.done():
            fut.set_exception(err) if err is not None else fut.set_result(result)
    node.execute(command, done)
    return fut


async def serving(nodes: Nodes, master: str, term: int = 1, acking: tuple[str, ...] | None = None) -> None:
    nodes.lead(master, term, acking)
    await eventually(lambda: nodes[master].serving, what=f"{master} serving")


async def converged(nodes: Nodes, master: str, *names: str) -> None:
    want = nodes[master].storage.digest()
    await eventually(lambda: all(nodes[n].storage.digest() == want for n in names), what=f"{names} converged")
    for n in names:
        assert_same_state(nodes[n].storage, nodes[master].storage)


@run
async def test_majority_completes_in_few_batches_and_replicas_converge():
    c = Nodes()
    await c.start()
    try:
        await serving(c, "n1")
        assert type(c["n1"].route()) is Local
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)
        first = c["n1"].core.groups[0].replication.log.last_seq
        futs = [execute(c["n1"], SendMessage(NS.key("q"), f"body-{i}")) for i in range(200)]
        await asyncio.wait_for(asyncio.gather(*futs), 5)
        assert c["n1"].core.groups[0].replication.log.last_seq - first < 10, \
            "group commit: a loop turn's sends share a batch"
        await converged(c, "n1", "n2", "n3")
        def reports_all_well() -> bool:
            st = c["n1"].status()
            return (st.replication.role == "master" and bool(st.replication.serving) and not st.replication.halted
                    and all(st.replication.replicas[r].connected for r in ("n2", "n3")))
        # a moment of it (a loaded machine can lapse a lease or a link for a heartbeat or two)
        await eventually(reports_all_well, what="the master's status says all is well")
        await eventually(lambda: all(r.acked_seq == c["n1"].core.groups[0].replication.log.last_seq
                                     for r in c["n1"].status().replication.replicas.values()), what="all acked")
        # a replica routes clients to its connected master and refuses to execute itself
        assert c["n2"].route() == ForwardTo("n1")
        with_err = execute(c["n2"], SendMessage(NS.key("q"), "x"))
        try:
            await with_err
            raise AssertionError("a replica executed a client operation")
        except NotServing:
            pass
    finally:
        await c.stop()


@run
async def test_with_one_replica_down_majority_completes_and_all_waits():
    c = Nodes()
    await c.start()
    try:
        # n3's Raft link stays up (it keeps acking the lease, so it stays in the view); its stream dies
        await serving(c, "n1", acking=("n2", "n3"))
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q", tags={POLICY_TAG: "all"})), 5)
        await c.stop("n3")
        await eventually(lambda: not c["n1"].core.liveness.connected("n3"), 3, "n3 seen disconnected")
        st = c["n1"].status()
        assert st.replication.replicas["n3"].connected is False and st.replication.halted
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "m")), 5)
        await asyncio.wait_for(execute(c["n1"], SendMessage(NS.key("m"), "majority")), 5)
        waiting_all = execute(c["n1"], SendMessage(NS.key("q"), "the queue's tag says all"))
        await asyncio.sleep(0.5)
        assert not waiting_all.done(), "`all` must not complete while a replica of the view is down"
        await converged(c, "n1", "n2")
    finally:
        await c.stop()
    assert isinstance(waiting_all.exception(), OutcomeUnknown)


@run
async def test_a_tag_change_takes_effect_for_the_next_operation():
    c = Nodes(policy="none")
    await c.start()
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)
        await c.stop("n2", "n3")
        # policy none: answered with no replica at all
        await asyncio.wait_for(execute(c["n1"], SendMessage(NS.key("q"), "unreplicated")), 2)
        await asyncio.wait_for(execute(c["n1"], TagQueue(NS.key("q"), {POLICY_TAG: "one"})), 2)
        waits = execute(c["n1"], SendMessage(NS.key("q"), "needs one replica"))
        await asyncio.sleep(0.3)
        assert not waits.done(), "the tag now asks for one replica"
    finally:
        await c.stop()


@run
async def test_a_cut_link_disconnects_both_ends_and_the_majority_goes_on():
    c = Nodes()
    for node in c.nodes.values():
        await node.start()
        c.bound[node.name] = node.stream.bound
    fwd = Forwarder(c.bound["n2"])
    fwd_addr = await fwd.start()
    c.reconfigure({("n1", "n2"): LinkAddrs(stream=fwd_addr)})
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)
        await converged(c, "n1", "n2", "n3")
        assert fwd.bytes > 0, "n1's frames to n2 went through the forwarder"
        await fwd.cut()
        await eventually(lambda: not c["n1"].core.liveness.connected("n2"), 3, "n2 reported disconnected")
        # n2 still reaches n1 directly, but no longer hears it: both ends see the link down
        await eventually(lambda: not c["n2"].core.liveness.connected("n1"), 3, "n2 sees n1 down")
        assert c["n2"].status().replication.halted
        assert type(c["n2"].route()) is Refuse, "no forwarding to a master it cannot reach"
        await asyncio.wait_for(execute(c["n1"], SendMessage(NS.key("q"), "after the cut")), 5)
        await converged(c, "n1", "n3")
    finally:
        await c.stop()


@run
async def test_a_new_master_serves_only_after_syncing_and_old_waiters_fail():
    c = Nodes()
    await c.start()
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q", tags={POLICY_TAG: "all"})), 5)
        await c.stop("n3")
        stuck = execute(c["n1"], SendMessage(NS.key("q"), "waits for n3"))
        await asyncio.sleep(0.05)
        c.lead("n2", 2, acking=("n1",))
        try:
            await asyncio.wait_for(stuck, 2)
            raise AssertionError("an operation outlived the view it waited in")
        except MasterChanged:
            pass
        await eventually(lambda: c["n2"].serving, 3, "serving after the sync with n1 (a majority of 3)")
        assert c["n1"].core.groups[0].replication.role == "replica"
        # the old master logged its staged tail before stepping down; the sync pulled it over
        assert c["n2"].core.groups[0].replication.log.last_seq == c["n1"].core.groups[0].replication.log.last_seq
        await asyncio.wait_for(execute(c["n2"], CreateQueue(NS, "r")), 5)
        await converged(c, "n2", "n1")
        assert c["n1"].route() == ForwardTo("n2")
    finally:
        await c.stop()


@run
async def test_a_new_master_without_a_majority_never_serves():
    c = Nodes()
    await c.start()
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)
        await c.stop("n1", "n3")
        c.lead("n2", 2, acking=())
        await asyncio.sleep(0.6)
        assert not c["n2"].serving, "one of three configured members is no majority"
        try:
            await asyncio.wait_for(execute(c["n2"], SendMessage(NS.key("q"), "x")), 1)
            raise AssertionError("a minority node executed a client operation")
        except NotServing:
            pass
    finally:
        await c.stop()


@run
async def test_a_batch_is_throttled_like_a_send():
    c = Nodes()
    await c.start()
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)
        core = c["n1"].core
        core.groups[0].throttling = True      # what the master core's flow control says while a replica lags
        from cluster.errors import Throttled
        for cmd in (SendMessage(NS.key("q"), "x"), SendMessageBatch(NS.key("q"), (Entry("a", "y"),))):
            try:
                await asyncio.wait_for(execute(c["n1"], cmd), 1)
                raise AssertionError(f"{type(cmd).__name__} was not throttled")
            except Throttled:
                pass
    finally:
        await c.stop()


class Forwarder:
    """A tiny TCP forwarder that counts bytes and can be cut (connections dropped, port closed)."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self.bytes = 0
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> Any:
        from cluster.config import Address
        self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        return Address("127.0.0.1", self._server.sockets[0].getsockname()[1])

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


assert NAMES == ("n1", "n2", "n3")


@run
async def test_a_client_callback_that_raises_does_not_stall_the_others():
    c = Nodes()
    await c.start()
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)

        def rude(result: Any, err: BaseException | None) -> None:
            raise RuntimeError("a client callback with a bug")
        # one turn: the rude callback's answer comes first among the batch's answers
        c["n1"].execute(SendMessage(NS.key("q"), "rude"), rude)
        futs = [execute(c["n1"], SendMessage(NS.key("q"), f"body-{i}")) for i in range(20)]
        await asyncio.wait_for(asyncio.gather(*futs), 5)
        await converged(c, "n1", "n2", "n3")
    finally:
        await c.stop()


def _acks_at_an_event_end(replica: ReplicatedStorage) -> list[bool]:
    """For each ack ``replica`` sends from now on: was it sent at the end of the event (a drain
    of stream frames, a journal's durability report) that released it?"""
    acks: list[bool] = []
    at_end = False
    ended = replica._event_ended
    sent = replica.stream.send

    def watch_end() -> None:
        nonlocal at_end
        at_end = True
        try:
            ended()
        finally:
            at_end = False

    def watch_send(to: str, frame: Any) -> bool:
        if type(frame) is Ack:
            acks.append(at_end)
        return sent(to, frame)
    replica.stream._on_drained = watch_end
    replica._event_ended = watch_end      # type: ignore[method-assign]
    replica.stream.send = watch_send      # type: ignore[method-assign]
    return acks


async def _assert_the_replica_acks_at_event_ends(c: Nodes) -> None:
    await c.start()
    try:
        await serving(c, "n1")
        await asyncio.wait_for(execute(c["n1"], CreateQueue(NS, "q")), 5)
        acks = _acks_at_an_event_end(c["n2"])
        for i in range(20):
            await asyncio.wait_for(execute(c["n1"], SendMessage(NS.key("q"), f"body-{i}")), 5)
        assert acks, "the replica acked"
        assert all(acks), f"{acks.count(False)} of {len(acks)} acks waited for a later loop turn"
        stats = c["n2"].journal_stats()
        assert stats is None or stats["fsyncs"] > 0, "a journaled replica journals"
    finally:
        await c.stop()


@run
async def test_a_replica_acks_in_the_loop_turn_that_delivered_the_batch():
    # The ack leaves when the drain that delivered the batch ends, not from a flush a loop turn
    # later: that turn per batch is a measurable share of a replica's CPU.
    await _assert_the_replica_acks_at_event_ends(Nodes(policy="all"))   # every batch waits for n2


@run
async def test_a_journaled_replica_acks_in_the_turn_its_journal_reported_durable():
    # With fsync = always the ack waits for the journal; it leaves with the durability report.
    with tempfile.TemporaryDirectory() as root:
        await _assert_the_replica_acks_at_event_ends(Nodes(policy="all", data_root=root))


@run
async def test_a_flush_asked_for_at_a_time_runs_then_and_not_before():
    # A gather's end (cluster/replication/master.py) comes as FlushDue(at): a timer on the loop.
    c = Nodes()
    await c.start()
    try:
        node = c["n1"]
        ran: list[float] = []
        node._flush = lambda: ran.append(node._now())    # type: ignore[method-assign]
        at = node._now() + 0.05
        node._do(FlushDue(at))
        await asyncio.sleep(0.02)
        assert ran == [], "not before its time"
        await eventually(lambda: bool(ran), what="the timed flush")
        assert ran[0] >= at - 0.002 and len(ran) == 1
    finally:
        await c.stop()


def _forward(node: ReplicatedStorage, payload: bytes) -> "asyncio.Future[Any]":
    fut = asyncio.get_running_loop().create_future()
    node.forward(payload, lambda answer, err: fut.set_exception(err) if err is not None else fut.set_result(answer))
    return fut


def _frames_sent(node: ReplicatedStorage, fail: type | None = None) -> list[tuple[str, Any]]:
    """(recipient, frame) of each frame of forwarding ``node`` sends from now on; ``fail``: the
    frame type whose sends fail, as a full or closed link's do."""
    frames: list[tuple[str, Any]] = []
    sent = node.stream.send

    def watch(to: str, frame: Any) -> bool:
        if type(frame) in (Forward, ForwardReply, ForwardBatch, ForwardReplies):
            frames.append((to, frame))
        return type(frame) is not fail and sent(to, frame)
    node.stream.send = watch      # type: ignore[method-assign]
    return frames


async def _n2_forwards_to_n1(c: Nodes) -> None:
    await serving(c, "n1")
    await eventually(lambda: type(c["n2"].route()) is ForwardTo, what="n2 forwarding")


@run
async def test_the_requests_of_a_turn_are_forwarded_and_answered_in_one_frame_each_way():
    c = Nodes()
    await c.start()
    try:
        await _n2_forwards_to_n1(c)
        served: list[bytes] = []

        def serve(payload: bytes, reply: Any) -> None:
            served.append(payload)
            reply(b"answer to " + payload)
        c["n1"]._serve_forwarded = serve
        out, back = _frames_sent(c["n2"]), _frames_sent(c["n1"])
        # n2 cannot know yet that n1 reads batches (an older build would not): single frames,
        # and n1 says it does
        first = [_forward(c["n2"], b"a"), _forward(c["n2"], b"b")]
        assert await asyncio.wait_for(asyncio.gather(*first), 5) == [b"answer to a", b"answer to b"]
        assert [type(f) for _, f in out] == [Forward, Forward]
        assert {type(f) for _, f in back} == {ForwardReply} and back[0][1].request_id == 0
        out.clear()
        back.clear()
        payloads = [b"r%d" % i for i in range(20)]
        answers = await asyncio.wait_for(asyncio.gather(*(_forward(c["n2"], p) for p in payloads)), 5)
        assert answers == [b"answer to " + p for p in payloads]
        assert [(to, type(f)) for to, f in out] == [("n1", ForwardBatch)] and len(out[0][1].items) == 20
        assert [(to, type(f)) for to, f in back] == [("n2", ForwardReplies)] and len(back[0][1].items) == 20
        assert served == [b"a", b"b", *payloads], "each request served once, in the order forwarded"
    finally:
        await c.stop()


@run
async def test_a_batch_the_runtime_could_not_queue_fails_each_request_at_once_as_never_sent():
    c = Nodes()
    await c.start()
    try:
        await _n2_forwards_to_n1(c)
        c["n1"]._serve_forwarded = lambda payload, reply: reply(payload)
        await asyncio.wait_for(_forward(c["n2"], b"learn"), 5)   # n2 learns that n1 reads batches
        _frames_sent(c["n2"], fail=ForwardBatch)
        futs = [_forward(c["n2"], b"x%d" % i) for i in range(3)]
        done = await asyncio.wait_for(asyncio.gather(*futs, return_exceptions=True), 5)
        assert all(type(e) is ForwardError and not e.sent and str(e) == "no connection to the master n1"
                   for e in done), done
        assert c["n2"].core.forwards_in_flight() == 0
    finally:
        await c.stop()


def test_answers_reach_their_callbacks_translated_and_changes_wake_long_polls_once():
    """A batch's answers leave in one call of the glue: each callback gets its result or its
    error as the client's (``client_error``), one callback that raises stops none of the others,
    and long polls are woken once for the lot, and only if something changed."""
    from storage.clock import ManualClock
    from cluster.config import NodeConfig
    from cluster.node_actions import Answer
    from tests.cluster.scripted_raft import ScriptedRaft, cluster_config

    woken: list[int] = []
    node = ReplicatedStorage(NodeConfig("n1", cluster_config()), ManualClock(0),
                             raft=lambda c, e: ScriptedRaft(None, c, e),   # type: ignore[arg-type]
                             on_changed=lambda: woken.append(1),
                             client_error=lambda err: RuntimeError(f"as the client sees it: {err}"))
    got: dict[str, tuple[Any, Any]] = {}

    def token(name: str, raises: bool = False):
        def done(result: Any, err: BaseException | None) -> None:
            got[name] = (result, None if err is None else str(err))
            if raises:
                raise ValueError("a client's callback failed")
        return done

    node._act([Answer(token("a", raises=True), "ra", None, True),
               Answer(token("b"), None, NotServing("not the master")),
               Answer(token("c"), "rc", None, True)])
    assert got == {"a": ("ra", None), "b": (None, "as the client sees it: not the master"), "c": ("rc", None)}
    assert woken == [1], "one wake-up for the batch's changes"
    node._act([Answer(token("d"), "rd", None, False), Answer(token("e"), None, NotServing("no"), True)])
    assert woken == [1], "nothing changed: no wake-up (a failed change changed nothing)"
