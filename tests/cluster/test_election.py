"""cluster/election.py: when a node stands, which Raft messages reach Raft, the fence and lease acks.

The core runs on pysyncobj's thread in the product and beside the Raft model in the simulator;
here it is driven directly with Raft's state as the runtime samples it."""

from __future__ import annotations

import random

from cluster.config import Timing
from cluster.election import (
    APPEND, CANDIDATE, FOLLOWER, LEADER, OTHER, TIMEOUT_NOW, VOTE_REQUEST, Deliver, ElectionCore, Fence, LeaseAck,
    LeaderContact, LeaseAcked, NotStanding, PreVote, PreVoteReply, RaftState, Send, Stand,
)

T = Timing()
PEERS = ("b", "c")


def core(now: float = 0.0, bugs: frozenset[str] = frozenset()) -> ElectionCore:
    return ElectionCore("a", T, random.Random(7), now, bugs=bugs)


def follower(term: int = 3, leader: str | None = None, last: tuple[int, int] = (10, 3)) -> RaftState:
    return RaftState(term, FOLLOWER, leader, last[0], last[1], PEERS)


def of(actions, kind):
    return [a for a in actions if type(a) is kind]


def until_pre_vote(e: ElectionCore, state: RaftState, start: float = 0.0) -> tuple[float, list]:
    """Tick every 20 ms (pysyncobj's tick) until the core asks for pre-votes."""
    now = start
    for _ in range(100):
        now += 0.02
        out = e.tick(now, state)
        if of(out, Send):
            return now, out
    raise AssertionError("never asked")


def test_without_a_leader_it_asks_first_and_stands_only_with_a_majority():
    e = core()
    now, out = until_pre_vote(e, follower())
    assert T.election_min <= now <= T.election_max + 0.02
    asks = of(out, Send)
    assert {a.to for a in asks} == set(PEERS)
    assert all(a.message == PreVote(4, 10, 3) for a in asks), "the term it would stand in, and its log"
    assert not of(out, Stand) and not e.standing
    assert e.on_message("b", PreVoteReply(4, False), now, follower()) == []
    out = e.on_message("c", PreVoteReply(4, True), now, follower())
    assert of(out, Stand) and e.standing, "itself and c: a majority of three"


def test_a_late_answer_to_an_old_round_counts_for_nothing():
    e = core()
    now, _ = until_pre_vote(e, follower(term=3))
    assert e.on_message("c", PreVoteReply(3, True), now, follower()) == []
    assert not e.standing


def test_cut_off_it_never_stands_and_says_why_once():
    e = core()
    state = follower()
    said, stood = [], []
    now = 0.0
    for _ in range(300):                 # six seconds: many rounds, no answer
        now += 0.02
        out = e.tick(now, state)
        said += of(out, NotStanding)
        stood += of(out, Stand)
    assert not stood
    assert [s.reason for s in said] == ["no majority of the members would vote for us (pre-vote)"]


def test_peers_grant_only_without_a_live_leader_and_to_a_log_as_up_to_date():
    e = core()
    now = 10.0
    mine = follower(term=5, leader="b", last=(10, 5))
    # a leader heard from just now: no
    e.appended("b", 5, 9.99, now, mine)
    assert e.on_message("c", PreVote(6, 10, 5), now, mine) == [Send("c", PreVoteReply(6, False))]
    # quiet for the minimum election timeout: yes, if the asker's log is as up to date
    later = now + T.election_min + 1e-6
    assert e.on_message("c", PreVote(6, 10, 5), later, mine) == [Send("c", PreVoteReply(6, True))]
    assert e.on_message("c", PreVote(6, 9, 5), later, mine) == [Send("c", PreVoteReply(6, False))]
    assert e.on_message("c", PreVote(6, 30, 4), later, mine) == [Send("c", PreVoteReply(6, False))]
    assert e.on_message("c", PreVote(6, 1, 6), later, mine) == [Send("c", PreVoteReply(6, True))]
    # terms are not compared: a node whose term fell behind catches up through the real vote
    assert e.on_message("c", PreVote(2, 10, 5), later, mine) == [Send("c", PreVoteReply(2, True))]
    # the leader itself: no
    leading = RaftState(5, LEADER, "a", 10, 5, PEERS)
    assert e.on_message("c", PreVote(6, 10, 5), later, leading) == [Send("c", PreVoteReply(6, False))]


def test_not_while_the_loop_says_it_may_not_stand():
    e = core()
    e.may_stand(False, "a state transfer is bringing this node up")
    now, stood, said = 0.0, [], []
    for _ in range(100):
        now += 0.02
        out = e.tick(now, follower())
        stood += of(out, Send) + of(out, Stand)
        said += of(out, NotStanding)
    assert not stood and said[0].reason == "a state transfer is bringing this node up"
    e.may_stand(True)
    _, out = until_pre_vote(e, follower(), now)
    assert of(out, Send)


def test_leader_contact_restarts_the_timer():
    e = core()
    state = follower(leader="b")
    now = 0.0
    for _ in range(100):
        now += 0.02
        e.appended("b", 3, now, now, state)      # heartbeats every tick
        assert not of(e.tick(now, state), Send)


def test_raft_that_did_not_stand_is_asked_again():
    e = core()
    now, _ = until_pre_vote(e, follower())
    e.on_message("b", PreVoteReply(4, True), now, follower())
    assert e.standing
    # Raft never started the election (it was not connected to anyone, say): a new round
    _, out = until_pre_vote(e, follower(), now)
    assert not e.standing and of(out, Send)


def test_once_raft_stands_it_is_raft_s_election():
    e = core()
    now, _ = until_pre_vote(e, follower())
    e.on_message("b", PreVoteReply(4, True), now, follower())
    e.tick(now + 0.02, RaftState(4, CANDIDATE, None, 10, 3, PEERS))
    assert not e.standing
    assert e.tick(now + 0.04, RaftState(4, LEADER, "a", 10, 3, PEERS)) == []


def test_the_vote_guard_drops_requests_after_leader_contact_and_at_start():
    e = core(now=0.0)
    state = follower(term=3, leader="b")
    vote = {"type": "request_vote", "term": 4}
    assert e.on_raft("c", VOTE_REQUEST, 4, vote, 0.1, state) == [], "within election_max of start"
    e.appended("b", 3, 1.0, 1.0, state)
    assert e.on_raft("c", VOTE_REQUEST, 4, vote, 1.0 + T.vote_guard / 2, state) == []
    assert e.votes_dropped == 2
    out = e.on_raft("c", VOTE_REQUEST, 4, vote, 1.0 + T.vote_guard + 1e-6, state)
    assert out == [Deliver("c", VOTE_REQUEST, 4, vote)]
    # everything else goes through
    assert e.on_raft("b", OTHER, 3, {"type": "x"}, 1.0, state) == [Deliver("b", OTHER, 3, {"type": "x"})]


def test_a_leader_hands_a_higher_term_vote_request_to_raft_only_after_the_fence():
    e = core(now=0.0)
    leading = RaftState(3, LEADER, "a", 10, 3, PEERS)
    vote = {"type": "request_vote", "term": 4}
    out = e.on_raft("c", VOTE_REQUEST, 4, vote, 5.0, leading)
    assert out == [Fence(4)]
    # what arrives meanwhile waits behind it, in order
    append = {"type": "append_entries", "term": 4}
    assert e.on_raft("c", APPEND, 4, append, 5.001, leading) == []
    assert e.fence_done(4) == [Deliver("c", VOTE_REQUEST, 4, vote), Deliver("c", APPEND, 4, append)]
    assert e.fence is None
    # a same-term request needs no fence
    assert e.on_raft("b", VOTE_REQUEST, 3, vote, 5.1, leading) == [Deliver("b", VOTE_REQUEST, 3, vote)]


def test_an_unanswered_fence_lets_go_once_no_lease_can_be_fresh():
    e = core(now=0.0)
    leading = RaftState(3, LEADER, "a", 10, 3, PEERS)
    vote = {"type": "request_vote", "term": 4}
    e.on_raft("c", VOTE_REQUEST, 4, vote, 5.0, leading)
    assert e.tick(5.0 + T.lease / 2, leading) == []
    out = e.tick(5.0 + T.lease * (1 + T.max_drift), leading)
    assert Deliver("c", VOTE_REQUEST, 4, vote) in out


def test_timeout_now_from_the_leader_stands_at_once():
    e = core(now=0.0)
    state = follower(term=3, leader="b")
    msg = {"type": "timeout_now", "term": 3}
    out = e.on_raft("b", TIMEOUT_NOW, 3, msg, 1.0, state)
    assert out[0] == Deliver("b", TIMEOUT_NOW, 3, msg) and of(out, Stand) and e.standing
    assert not of(e.on_raft("c", TIMEOUT_NOW, 3, msg, 1.0, state), Stand), "only the leader may ask"


def test_an_accepted_append_is_acked_with_its_stamp_and_contact_recorded():
    e = core()
    state = follower(term=3, leader="b")
    assert e.appended("b", 3, 4.5, 5.0, state) == [Send("b", LeaseAck(3, 4.5)), LeaderContact("b", 5.0)]
    assert e.guard.last_contact == 5.0
    # the loop hears of the contact at most once a heartbeat period
    assert e.appended("b", 3, 4.51, 5.01, state) == [Send("b", LeaseAck(3, 4.51))]
    later = 5.0 + T.heartbeat + 1e-6
    assert of(e.appended("b", 3, 4.6, later, state), LeaderContact) == [LeaderContact("b", later)]
    assert e.appended("c", 3, 4.6, 5.1, state) == [], "not from our leader: not accepted"
    assert e.appended("b", 2, 4.6, 5.1, state) == [], "another term: not accepted"
    assert e.guard.last_contact == later
    assert e.on_message("c", LeaseAck(3, 1.0), 5.0, state) == [LeaseAcked("c", 3, 1.0)]


def test_planted_no_pre_vote_stands_on_the_timer():
    e = core(bugs=frozenset({"no-pre-vote"}))
    now, stood = 0.0, []
    for _ in range(30):
        now += 0.02
        out = e.tick(now, follower())
        assert not of(out, Send)
        stood += of(out, Stand)
    assert stood, "cut off and unasked, it stands anyway"
