"""The `hung` rare path: an fsync hung across two master changes (sim/scenario.py ``_hung``).

The master writes a tail nobody takes, its next fsync hangs and it is isolated; the next master
resets it by a transfer (the reset waits behind the hung fsync), hands its office to an heir and
is isolated; once the hung node holds the ack of a later batch, the fsync returns and the power
of every node is cut. A try has the floor: the faults that come due meanwhile wait for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.rare.fork import FORK_POLL_US
from sim.scenario import Fault

if TYPE_CHECKING:
    from sim.node import SimNode
    from sim.world import World

HUNG_STAGES_S = 6.0               # a try of the hung path needs its lead plus about this
HUNG_RETRY_US = 500_000           # ... and starts this long after the try before it lost its way
HUNG_HAND_S = 0.5                 # the heir of the master that reset the hung node takes over within this


class Hung:
    def __init__(self, world: World) -> None:
        self.world = world
        self.wait: tuple | None = None      # a step waiting for its master's next fsync
        self.held: list[Fault] | None = None   # faults due while a try has the floor

    def step(self, f: Fault) -> None:
        """Cut the master of the moment's stream (both ways, Raft up) for the lead: it writes a
        tail no replica takes; then its next fsync hangs (``fsync_hung``). Waits for a master
        while a try still fits in the fault window (``_again``)."""
        w = self.world
        if w.healed:
            return
        m = w.master()
        if m is None or m.writer is None:
            if self._fits(f):
                w.at(w.now + 100_000, self.step, f)
            return
        w.last_fault_at = w.now
        name = m.name
        others = [o for o in w.names if o != name]
        stream = [(name, o) for o in others] + [(o, name) for o in others]
        for a, b in stream:
            w.net.cut_stream(a, b)
        w.nemesis.note(name, "stream_cut", {"links": [list(x) for x in stream], "lead_s": f.params["lead_s"],
                                            "hung": True})
        if self.held is None:
            self.held = []
        w.health.check()
        w.at(w.now + int(f.params["lead_s"] * 1e6), self._arm, f, name, m.incarnation, stream)

    def _fits(self, f: Fault) -> bool:
        """Another try of the path still fits before the fault window ends: its lead, and time
        for its stages."""
        w = self.world
        return w.now_s + f.params["lead_s"] + HUNG_STAGES_S <= w.sc.fault_end

    def _again(self, f: Fault) -> None:
        """A try that lost its way (the master deposed or crashed during the lead, no fsync, a
        stage that did not come) gives way to another on the master of the moment, if it fits."""
        w = self.world
        self._yield(0)
        if not w.healed and self._fits(f):
            w.at(w.now + HUNG_RETRY_US, self.step, f)

    def _yield(self, after_us: int) -> None:
        """A try is over: the faults that came due while it had the floor start ``after_us``
        from now, in their order."""
        w = self.world
        held, self.held = self.held, None
        for f in held or ():
            w.at(w.now + after_us, w.nemesis.fault, f)

    def _arm(self, f: Fault, name: str, inc: int, stream: list[tuple[str, str]]) -> None:
        w = self.world
        node = w.nodes.get(name)
        m = w.master()
        if w.healed or node is None or not node.alive or node.incarnation != inc or node.writer is None \
                or m is not node:
            # deposed or down during the lead (other faults): its tail reaches the next sync
            # as any deposed master's does
            if not w.healed:
                for a, b in stream:
                    w.net.restore_stream(a, b)
                w.health.check()
                self._again(f)
            return
        node.writer.hang = True
        wait = (f, name, inc, stream)
        self.wait = wait
        w.at(w.now + int(f.params["wait_s"] * 1e6), self._unarmed, wait)

    def _unarmed(self, wait: tuple) -> None:
        """No fsync began: give up."""
        w = self.world
        if self.wait is not wait:
            return
        self.wait = None
        f, name, inc, stream = wait
        node = w.nodes.get(name)
        if node is not None and node.incarnation == inc and node.writer is not None:
            node.writer.hang = False
        if not w.healed:
            for a, b in stream:
                w.net.restore_stream(a, b)
            w.health.check()
            self._again(f)

    def fsync_hung(self, node: SimNode) -> None:
        """sim/node.py: ``node``'s fsync hangs from now (its writer was told to). The node, whose
        tail reached nobody, is isolated: the next master syncs without it."""
        w = self.world
        wait = self.wait
        if wait is None or node.name != wait[1] or node.incarnation != wait[2]:
            node.writer.release()
            return
        self.wait = None
        f, name, inc, stream = wait
        if w.healed:
            node.writer.release()
            return
        w.last_fault_at = w.now
        tail = node.writer.journal.last_seq       # the entries the hung fsync covers
        w.reach.counts["hung_fsyncs"] += 1
        links = w.nemesis.isolate(name, {"hung_fsync_seq": tail})
        for a, b in stream:
            w.net.restore_stream(a, b)
        w.health.check()
        w.at(w.now + FORK_POLL_US, self._watch, f, ("elect", name, inc, links, tail, None, None), 0)

    def _watch(self, f: Fault, state: tuple, polls: int) -> None:
        """The hung node's way through two master changes, each stage within ``wait_s``:
        "elect": once another node leads Raft, give the hung node its Raft links back, its
        stream still cut; "raft": once that node serves, its stream too (it is divergent: a
        transfer, which its stream connection's handshake starts a little later); "reset": once
        it restored that master's transfer (its reset not yet durable behind the hung fsync),
        that master steps down in favour of another member, the heir ("hand": within
        ``HUNG_HAND_S``), and is isolated for ``hold_s``; "ack": once the hung node holds an ack
        of a batch past the transfer's position from the master after that (which positioned
        it and streamed to it), the fsync returns, and ``cut_after_us`` later the power is cut.
        A stage that does not come in time releases the fsync, and the path tries again
        (``_again``)."""
        w = self.world
        stage, name, inc, links, tail, second, at = state
        node = w.nodes.get(name)
        if w.healed or node is None or not node.alive or node.incarnation != inc:
            # the hung node went down (other faults): its links come back as they do on a release
            if not w.healed and stage == "elect":
                w.nemesis.restore_links(links, "hung", None)
            elif not w.healed and stage == "raft":
                for a, b in links:
                    w.net.restore_stream(a, b)
            if not w.healed:
                w.health.check()
            self._again(f)
            return
        group = node.core.groups[0]
        if polls * FORK_POLL_US > (HUNG_HAND_S if stage == "hand" else f.params["wait_s"]) * 1e6:
            if stage == "hand":     # the heir did not take over: the isolation decides
                self._isolate(f, second, at, tail)
                state, polls = ("ack", name, inc, None, tail, second, at), -1
            else:
                if stage == "raft" and not w.healed:
                    for a, b in links:
                        w.net.restore_stream(a, b)
                self._release(f, node, links if stage == "elect" else None, cut=False)
                self._again(f)
                return
        m = w.master()
        if stage == "elect":
            if any(o != name and x.alive and x.raft.role == "leader" for o, x in w.nodes.items()):
                # another node leads Raft: the hung node gets its Raft links back (it follows, and
                # is current in Raft when its stream comes back), its stream still cut, so that
                # the next master's sync goes on without it (its tail would be the truth)
                for a, b in links:
                    w.net.cut_stream(a, b)
                w.nemesis.restore_links(links, "hung", None)
                w.health.check()
                state, polls = ("raft", name, inc, links, tail, None, None), -1
        elif stage == "raft":
            if m is not None and m.name != name:
                for a, b in links:
                    w.net.restore_stream(a, b)
                w.nemesis.note("", "heal", {"fault": "hung", "links": [list(x) for x in links], "stream": True})
                w.health.check()
                state, polls = ("reset", name, inc, None, tail, m.name, None), -1
        elif stage == "reset":
            taken = group.replication.last_transfer
            if taken is not None and taken.get("direction") == "received" and taken.get("peer") == second \
                    and group._resets_pending:
                at = taken["at_seq"]
                w.reach.counts["hung_resets"] += 1
                w.reach.counts["hung_tails"] += tail > at
                # The master after this one must be another member, which positions the hung node
                # and streams to it: one elected when this one is isolated may be the hung node
                # itself (its Raft log is whole), so this one first hands its office to an heir
                # (an operator's step-down with a target: Raft's leadership transfer).
                s = w.nodes.get(second)
                heirs = [o for o in w.names if o not in (name, second) and o in w.nodes
                         and w.nodes[o].alive and not w.nodes[o].frozen]
                if s is not None and s.alive and not s.frozen and heirs and m is s:
                    heir = heirs[int(f.params["pick"] * len(heirs))]
                    w.nemesis.note(second, "step_down", {"to": heir, "hung_reset_seq": at})
                    s.step_down(heir)
                    state, polls = ("hand", name, inc, None, tail, second, at), -1
                else:
                    self._isolate(f, second, at, tail)
                    state, polls = ("ack", name, inc, None, tail, second, at), -1
        elif stage == "hand":
            if m is not None and m.name not in (second, name):     # the heir serves
                self._isolate(f, second, at, tail)
                state, polls = ("ack", name, inc, None, tail, second, at), -1
            elif _holds_ack_past_reset(group, at):
                # its transfer failed and this master was elected again, positioning the hung node
                self._release(f, node, None, cut=True)
                return
        elif stage == "ack":
            if _holds_ack_past_reset(group, at):
                self._release(f, node, None, cut=True)
                return
        w.at(w.now + FORK_POLL_US, self._watch, f, state, polls + 1)

    def _isolate(self, f: Fault, second: str, at: int, tail: int) -> None:
        """The master that reset the hung node is isolated for ``hold_s``."""
        w = self.world
        cut = w.nemesis.isolate(second, {"hung_reset_seq": at, "hung_fsync_seq": tail})
        w.health.check()
        w.at(w.now + int(f.params["hold_s"] * 1e6), w.nemesis.restore_links, cut, "hung", None)

    def _release(self, f: Fault, node: SimNode, links: list[tuple[str, str]] | None, cut: bool) -> None:
        """The hung fsync returns (the fsyncs after it take ``slow_ms`` more); with ``cut``, the
        power of every node is cut ``cut_after_us`` later, keeping nothing unsynced."""
        w = self.world
        if links is not None:
            w.nemesis.restore_links(links, "hung", None)
        if cut:
            node.writer.slow_us = int(f.params["slow_ms"] * 1000)
        node.writer.release()
        w.nemesis.note(node.name, "fsync_returns", {"cut": cut})
        if cut:
            w.reach.counts["hung_releases"] += 1
            power = Fault(0.0, "hung", f.params["down_s"], "", {"stagger_ms": f.params["stagger_ms"]})
            w.at(w.now + f.params["cut_after_us"], w.nemesis.power_cut_now, power)
            # what came due during the try starts once every node has its power back
            self._yield(f.params["cut_after_us"] + int((f.params["down_s"] + f.params["stagger_ms"] / 1000) * 1e6) + 1)
        w.health.check()


def _holds_ack_past_reset(group: Any, at: int) -> bool:
    """The hung node holds, behind its reset still pending in the hung fsync, an ack of a batch
    past the transfer's position ``at``: the moment the hung path releases the fsync."""
    return bool(group._resets_pending) and any(a.seq > at for a in group._held_acks.values())
