"""The judges of Raft's side of the nodes, as Raft saw it (not as the election cores recorded it).

* **Pre-vote** (``stood``): a node stands only if a majority could reach it for an election
  timeout; one cut off from a majority never gets its yes.
* **Disruption** (``stood``): no election may depose a leader that held Raft links both ways
  with a majority for the last election timeout.
* **The vote guard** (``voted``, cluster/lease.py): every vote comes at least the guard after
  the voter last accepted another leader's AppendEntries.
* **Healing deposes nobody** (invariant 6, ``judge_heal``): a master that kept its majority
  through a cut stays master in its epoch once the cut heals, with no election anywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.node import HOP_US

if TYPE_CHECKING:
    from sim.world import World

HEAL_QUIET_US = 2_000_000         # after a heal, a master that kept its majority keeps office this long


class Elections:
    def __init__(self, world: World) -> None:
        self.world = world
        # healing deposes nobody: each node's deactivations so far (with several groups: as master
        # of group 0, whose office is judged), the last handover of that group (a rebalance, not
        # the heal's doing), the heals judged, the failures
        self._deactivations: dict[str, int] = {}
        self._handed_over_at = -1
        self.heal_checks = 0
        self.heal_failures: list[str] = []
        # the vote guard's premise: when each node last accepted an AppendEntries, and from whom
        self.leader_contact: dict[str, tuple[int, str]] = {}
        self.vote_failures: list[str] = []
        self.disruptions_judged = 0
        self.disrupt_failures: list[str] = []

    def deactivated(self, node: str, group: int = 0) -> None:
        if group == 0:
            self._deactivations[node] = self._deactivations.get(node, 0) + 1

    def handed_over(self, group: int) -> None:
        """A master began handing ``group`` over (the leader's balance step, or an operator's)."""
        if group == 0:
            self._handed_over_at = self.world.now

    def stood(self, name: str) -> None:
        """``name`` stands for election. With a pre-vote it can only have a majority's yes if
        enough peers' links to it carried their answers: a node that nobody (or too few) could
        reach for a whole election timeout, and more, never stands."""
        w = self.world
        quorum = len(w.names) // 2 + 1
        cut_off = w.timing.election_max * 1e6 + 2 * HOP_US[1]
        reachable = sum(1 for p in w.names if p != name and w.net.down_for(p, name) <= cut_off)
        if reachable + 1 < quorum:
            self.heal_failures.append(f"pre-vote: {name} stood for election at {w.now_s:.3f} s, cut off from "
                                      f"a majority (only {reachable} peers could reach it)")
        self._judge_disruption(name)
        w.rare.stood(name)

    def _judge_disruption(self, name: str) -> None:
        """``name`` stands. No election may depose a leader that has held Raft links both ways
        with a majority (itself included) for the last election timeout: up and running, no
        cut, no extra latency, nothing lost or doubled. Each of them then accepted the leader's
        heartbeats within that time, so none grants a pre-vote, and no majority says yes.
        Exempt (not judged): a stand that the leader asked for (leadership transfer), any
        stand while some node's term is ahead of the leader's (a candidate that lost, whose
        term legitimately ran ahead: it refuses the leader's AppendEntries, and grants pre-votes,
        until the leader adopts its term, cluster/election.py TermAhead), and a stand from a
        term behind the leader's, which deposes nobody: its vote requests carry a term no
        higher than the leader's, which every member at the leader's term refuses. A node
        resuming from a pause stands so, on grants from before it, before it reads the
        leader's heartbeats that waited for it (its Raft side stands before the election
        core's tick would drop the stale stand, as pysyncobj's thread does)."""
        w = self.world
        nodes = w.nodes
        leaders = [x for x in nodes.values() if x.alive and x.raft.role == "leader" and x.name != name]
        if not leaders:
            return
        lead = max(leaders, key=lambda x: x.raft.term)
        term = lead.raft.term
        me = nodes[name]
        if me.election._transfer or me.raft.term < term or any(x.alive and x.raft.term > term for x in nodes.values()):
            return
        since = w.now - int(w.timing.election_max * 1e6)
        running, links = w.running_since, w.net.links

        def calm(a: str, b: str) -> bool:
            c = links[(a, b)].raft_calm_since
            return c is not None and c <= since

        if w.nemesis.noise_free_since is None or w.nemesis.noise_free_since > since \
                or running.get(lead.name, w.now) > since or lead.raft.leader_since * 1e6 > since:
            return
        held = [p for p in w.names if p != lead.name and running.get(p, w.now) <= since
                and calm(lead.name, p) and calm(p, lead.name)]
        quorum = len(w.names) // 2 + 1
        self.disruptions_judged += 1
        if len(held) + 1 >= quorum:
            self.disrupt_failures.append(
                f"disruption: {name} stood for election at {w.now_s:.3f} s while leader {lead.name} "
                f"(term {term}) had held Raft links both ways with a majority ({', '.join(held)}) for "
                f"the last election timeout")

    def voted(self, name: str, candidate: str, term: int) -> None:
        """``name`` voted for ``candidate`` in ``term``. The lease argument (cluster/lease.py, case
        2) needs every vote to come at least G after the voter last accepted another leader's
        AppendEntries: else the old leader may still hold a lease resting on the voter's ack
        when the candidate wins. Judged on Raft's side of the node, so a fault in how the
        election core tracks that contact is caught as well as one in its guard."""
        w = self.world
        contact = self.leader_contact.get(name)
        if contact is None or contact[1] == candidate:
            return
        since = w.now - contact[0]
        if since < w.timing.vote_guard * 1e6:
            self.vote_failures.append(
                f"vote guard: {name} voted for {candidate} in term {term} at {w.now_s:.3f} s, "
                f"{since / 1000:.1f} ms after it accepted {contact[1]}'s AppendEntries "
                f"(the guard is {w.timing.vote_guard * 1000:.0f} ms)")

    def office(self) -> tuple[str, int, int] | None:
        """The active master now: (name, epoch, its deactivations so far). With several groups,
        group 0's master in its group's epoch (a Raft election moves no group by itself)."""
        w = self.world
        m = w.master()
        if m is None or m.core.view is None:
            return None
        mastery = m.core.groups[0].mastery
        epoch = m.core.view.epoch if mastery is None else mastery.epoch
        return m.name, epoch, self._deactivations.get(m.name, 0)

    def _quiet(self) -> bool:
        """No fault in play: every link up and unslowed, nothing lost or doubled, every node up."""
        w = self.world
        net = w.net
        return (not w.down and not w.paused and not net.drop and not net.dup
                and all(not link.cuts and not link.stream_cuts and not any(link.extra_us)
                        for link in net.links.values()))

    def judge_heal(self, kind: str, office: tuple | None) -> None:
        """A master that kept its majority through a cut (active at its start and at the heal,
        never deactivated in between) stays master in its epoch, with no election anywhere, as
        long as nothing else happens: judged HEAL_QUIET_US later, if the network stayed quiet."""
        w = self.world
        now_office = self.office()
        if office is None or now_office is None or now_office != office or not self._quiet():
            return
        term = w.nodes[office[0]].raft.term
        w.at(w.now + HEAL_QUIET_US, self._heal_verdict, kind, w.now, office, term)

    def _heal_verdict(self, kind: str, healed_at: int, office: tuple, term: int) -> None:
        w = self.world
        if w.last_fault_at > healed_at or self._handed_over_at > healed_at or not self._quiet():
            return      # something else happened since: not the heal's doing
        self.heal_checks += 1
        name, epoch, _ = office
        now_office = self.office()
        # An election is a term beyond the master's (a node that was cut off catching up to the
        # master's term is not one).
        raised = sorted(n for n in w.names if w.nodes[n].raft.term > term)
        if now_office == office and not raised:
            return
        what = (f"the master changed from {name} in epoch {epoch} to {now_office[0]} in epoch {now_office[1]}"
                if now_office is not None and now_office[:2] != (name, epoch)
                else f"{name} lost office" if now_office != office else "an election was held")
        self.heal_failures.append(f"heal: after the {kind} healed at {healed_at / 1e6:.3f} s, {what}"
                                  + (f" ({', '.join(raised)} raised the term)" if raised else ""))
