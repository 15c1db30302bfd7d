"""The terms judge (sim/terms.py) on hand-built Raft sides: pre-votes, stands and the terms seen."""

from __future__ import annotations

from sim.terms import TermCheck

NAMES = ["n1", "n2", "n3"]


def test_terms_that_rise_by_a_stand_and_its_messages_pass():
    check = TermCheck(NAMES)
    check.pre_vote_sent("n1", 1)
    check.pre_vote_granted("n1", "n2", 1)           # a majority of three: n1 and n2
    check.stood("n1", 1.0, 1)
    check.term("n1", 1.0, 1)
    check.term("n2", 1.01, 1)                       # its vote request
    check.term("n3", 1.02, 1)                       # the new leader's AppendEntries
    check.transfer_asked("n2")                      # the leader hands on (TimeoutNow)
    check.stood("n2", 2.0, 2)
    check.term("n2", 2.0, 2)
    check.term("n1", 2.01, 2)
    assert check.failures == []
    assert check.stands == 2


def test_a_voter_that_takes_a_pre_votes_term_fails():
    check = TermCheck(NAMES)
    check.pre_vote_sent("n1", 1)
    check.term("n2", 0.5, 1)                        # n2 adopted the term n1 would stand in
    assert check.failures == ["terms: n2's term rose from 0 to 1 at 0.500000 s, a term no node has stood in"]


def test_a_stand_without_a_pre_vote_majority_or_a_transfer_fails():
    check = TermCheck(NAMES)
    check.pre_vote_sent("n1", 1)
    check.pre_vote_granted("n1", "n2", 0)           # an answer to an older round counts nothing
    check.stood("n1", 1.0, 1)
    assert check.failures == ["terms: n1 stood for election in term 1 at 1.000000 s with 1 of the 2 pre-votes "
                              "it needs, and no leadership transfer asked for it"]


def test_grants_and_a_transfer_are_spent_by_the_stand_they_explain():
    check = TermCheck(NAMES)
    check.pre_vote_sent("n1", 1)
    check.pre_vote_granted("n1", "n2", 1)
    check.stood("n1", 1.0, 1)
    check.transfer_asked("n3")
    check.stood("n3", 2.0, 2)
    assert check.failures == []
    check.stood("n1", 3.0, 3)
    check.stood("n3", 3.0, 3)
    assert len(check.failures) == 2
