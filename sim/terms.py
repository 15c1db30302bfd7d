"""Raft terms, judged as they rise: every rise is explained by a stand.

With pre-vote (Raft thesis 9.6) a term rises only because some node stood for election in it,
and a node stands only once a majority (itself included) said yes to its pre-vote, or when its
leader asked it to (leadership transfer, ``TimeoutNow``). A pre-vote changes no term, neither
the asker's nor a voter's: that is what lets a node cut off from the majority rejoin without
deposing anyone. Every other rise is a term learned from a message (a vote request, an
AppendEntries, a pre-vote's answer, ``TermAhead``), and every term a message carries was held
first by a node that stood in it. Judged on the Raft side of the nodes, from the messages and
terms of the Raft model (sim/raft.py), not from what the election core says it did:

* **A stand has its reason.** A node that stands either holds granted answers from a majority
  to its latest round of pre-votes, or was sent ``TimeoutNow`` by its leader since it last
  stood.
* **A rise has its stand.** A node's term rises only to a term some node has stood in (itself,
  in this very stand, or another before).

A term that rose without a stand does its harm later, if at all (the node's next vote request
or append answer deposes a leader that a majority still follows): judging the rise itself
catches it where it happens.
"""

from __future__ import annotations

MAX_REPORTED = 5


class TermCheck:
    def __init__(self, names: list[str]) -> None:
        self.quorum = len(names) // 2 + 1
        self._failures: list[str] = []
        self._more = 0
        self.stands = 0
        self.rises = 0
        self._term: dict[str, int] = {}                 # each node's term as last seen
        self._stood: set[int] = set()                   # terms some node stood in
        self._round: dict[str, tuple[int, set[str]]] = {}   # node -> its latest pre-vote round, granted by
        self._asked: set[str] = set()                   # nodes their leader asked to stand

    @property
    def failures(self) -> list[str]:
        return self._failures + ([f"terms: {self._more} more"] if self._more else [])

    def pre_vote_sent(self, node: str, round_id: int) -> None:
        rnd = self._round.get(node)
        if rnd is None or rnd[0] != round_id:
            self._round[node] = (round_id, set())

    def pre_vote_granted(self, node: str, voter: str, round_id: int) -> None:
        rnd = self._round.get(node)
        if rnd is not None and rnd[0] == round_id:
            rnd[1].add(voter)

    def transfer_asked(self, node: str) -> None:
        """``node``'s leader sent it ``TimeoutNow``."""
        self._asked.add(node)

    def stood(self, node: str, at: float, term: int) -> None:
        """``node`` stands for election in ``term``."""
        self.stands += 1
        rnd = self._round.pop(node, None)
        granted = 1 + (len(rnd[1]) if rnd is not None else 0)
        if node not in self._asked and granted < self.quorum:
            self._fail(f"{node} stood for election in term {term} at {at:.6f} s with {granted} of the "
                       f"{self.quorum} pre-votes it needs, and no leadership transfer asked for it")
        self._asked.discard(node)
        self._stood.add(term)

    def term(self, node: str, at: float, term: int) -> None:
        """``node``'s Raft term is ``term`` now."""
        was = self._term.get(node, 0)
        if term <= was:
            return
        self._term[node] = term
        self.rises += 1
        if term not in self._stood:
            self._fail(f"{node}'s term rose from {was} to {term} at {at:.6f} s, a term no node has stood in")

    def _fail(self, what: str) -> None:
        if len(self._failures) < MAX_REPORTED:
            self._failures.append(f"terms: {what}")
        else:
            self._more += 1
