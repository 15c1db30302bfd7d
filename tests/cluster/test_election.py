"""cluster/election.py: when a node stands, which Raft messages reach Raft, the fence and lease acks.

The core runs on pysyncobj's thread in the product and beside the Raft model in the simulator;
here it is driven directly with Raft's state as the runtime samples it."""

from __future__ import annotations

import random

from cluster.config import Timing
from cluster.election import (
    APPEND, CANDIDATE, FOLLOWER, LEADER, OTHER, TIMEOUT_NOW, VOTE_REQUEST, AdoptTerm, Deliver, ElectionCore, Fence,
    LeaseAck, LeaderContact, LeaseAcked, NotStanding, PreVote, PreVoteReply, RaftState, Release, Send, Stand,
    TermAhead,
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
    r = asks[0].message.round
    assert all(a.message == PreVote(4, 10, 3, r) for a in asks), "the term it would stand in, and its log"
    assert not of(out, Stand) and not e.standing
    assert e.on_message("b", PreVoteReply(4, False, r, 3), now, follower()) == []
    out = e.on_message("c", PreVoteReply(4, True, r, 3), now, follower())
    assert of(out, Stand) and e.standing, "itself and c: a majority of three"
    assert not of(out, AdoptTerm), "no voter is ahead of its term"


def test_a_late_answer_to_an_old_round_or_from_a_stranger_counts_for_nothing():
    e = core()
    now, out = until_pre_vote(e, follower(term=3))
    r = of(out, Send)[0].message.round
    assert e.on_message("c", PreVoteReply(4, True, r - 1, 3), now, follower()) == [], "another round, same term"
    assert e.on_message("z", PreVoteReply(4, True, r, 3), now, follower()) == [], "not a member"
    assert not e.standing


def test_it_stands_beyond_the_highest_term_a_voter_holds():
    # pysyncobj ignores a vote request of an older term: standing at our term + 1 would fail
    # against voters further ahead, one term at a time.
    e = core()
    now, out = until_pre_vote(e, follower(term=3))
    r = of(out, Send)[0].message.round
    out = e.on_message("b", PreVoteReply(4, True, r, 9), now, follower(term=3))
    assert out[:1] == [AdoptTerm(9)] and of(out, Stand)
    # Raft adopts 9 and stands in 10: the stand is over once Raft is past 9
    e.tick(now + 0.02, RaftState(9, FOLLOWER, None, 10, 3, PEERS))
    assert e.standing
    e.tick(now + 0.04, RaftState(10, CANDIDATE, None, 10, 3, PEERS))
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
    assert e.on_message("c", PreVote(6, 10, 5, 1), now, mine) == [Send("c", PreVoteReply(6, False, 1, 5))]
    # quiet for the minimum election timeout: yes, if the asker's log is as up to date
    later = now + T.election_min + 1e-6
    assert e.on_message("c", PreVote(6, 10, 5, 2), later, mine) == [Send("c", PreVoteReply(6, True, 2, 5))]
    assert e.on_message("c", PreVote(6, 9, 5, 3), later, mine) == [Send("c", PreVoteReply(6, False, 3, 5))]
    assert e.on_message("c", PreVote(6, 30, 4, 4), later, mine) == [Send("c", PreVoteReply(6, False, 4, 5))]
    assert e.on_message("c", PreVote(6, 1, 6, 5), later, mine) == [Send("c", PreVoteReply(6, True, 5, 5))]
    # terms are not compared; the answer says ours, and the asker stands beyond it
    assert e.on_message("c", PreVote(2, 10, 5, 6), later, mine) == [Send("c", PreVoteReply(2, True, 6, 5))]
    # the leader itself: no
    leading = RaftState(5, LEADER, "a", 10, 5, PEERS)
    assert e.on_message("c", PreVote(6, 10, 5, 7), later, leading) == [Send("c", PreVoteReply(6, False, 7, 5))]


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


def grant(e: ElectionCore, out, now: float, state: RaftState, voter: str = "b") -> list:
    r = of(out, Send)[0].message.round
    return e.on_message(voter, PreVoteReply(state.term + 1, True, r, state.term), now, state)


def test_raft_that_did_not_stand_is_asked_again():
    e = core()
    now, out = until_pre_vote(e, follower())
    grant(e, out, now, follower())
    assert e.standing
    # Raft never started the election (it was not connected to anyone, say): a new round
    _, out = until_pre_vote(e, follower(), now)
    assert not e.standing and of(out, Send)


def test_once_raft_stands_it_is_raft_s_election():
    e = core()
    now, out = until_pre_vote(e, follower())
    grant(e, out, now, follower())
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
    held = (Deliver("c", VOTE_REQUEST, 4, vote), Deliver("c", APPEND, 4, append))
    assert e.fence_done(4) == [Release(held)]
    assert e.fence is None
    # let through again, each is judged afresh; the fenced term needs no second fence
    assert e.on_raft("c", VOTE_REQUEST, 4, vote, 5.002, leading) == [held[0]]
    # a same-term request needs no fence
    assert e.on_raft("b", VOTE_REQUEST, 3, vote, 5.1, leading) == [Deliver("b", VOTE_REQUEST, 3, vote)]


def test_messages_let_through_a_fence_meet_the_vote_guard_again():
    # Released behind the fence: the new leader's append, then a third candidate's vote
    # request. Once Raft accepted the append, the guard drops the vote request.
    e = core(now=0.0)
    leading = RaftState(3, LEADER, "a", 10, 3, PEERS)
    e.on_raft("b", VOTE_REQUEST, 4, {"type": "request_vote", "term": 4}, 5.0, leading)
    e.on_raft("b", APPEND, 4, {"type": "append_entries", "term": 4}, 5.001, leading)
    e.on_raft("c", VOTE_REQUEST, 5, {"type": "request_vote", "term": 5}, 5.002, leading)
    (release,) = e.fence_done(4)
    now = 5.01
    vote_b, append_b, vote_c = release.held
    assert e.on_raft(vote_b.sender, vote_b.kind, vote_b.term, vote_b.message, now, leading) == [vote_b]
    following = RaftState(4, FOLLOWER, "b", 10, 3, PEERS)
    assert e.on_raft(append_b.sender, append_b.kind, append_b.term, append_b.message, now, following) == [append_b]
    e.appended("b", 4, now, now, following)
    assert e.on_raft(vote_c.sender, vote_c.kind, vote_c.term, vote_c.message, now, following) == []
    assert e.votes_dropped == 1


def test_an_unanswered_fence_lets_go_once_no_lease_can_be_fresh():
    e = core(now=0.0)
    leading = RaftState(3, LEADER, "a", 10, 3, PEERS)
    vote = {"type": "request_vote", "term": 4}
    e.on_raft("c", VOTE_REQUEST, 4, vote, 5.0, leading)
    assert e.tick(5.0 + T.lease / 2, leading) == []
    out = e.tick(5.0 + T.lease * (1 + T.max_drift), leading)
    assert Release((Deliver("c", VOTE_REQUEST, 4, vote),)) in out


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


def test_an_accepted_append_calls_off_a_stand_raft_has_not_made_yet():
    # The lease argument needs E between our last ack to a leader and our standing: a stand
    # given, then an append from the live leader accepted before Raft's next tick, must not go on.
    e = core()
    now, out = until_pre_vote(e, follower(term=5, leader="b"))
    grant(e, out, now, follower(term=5, leader="b"), voter="c")
    assert e.standing
    acked = e.appended("b", 5, now, now + 0.005, follower(term=5, leader="b"))
    assert of(acked, Send) == [Send("b", LeaseAck(5, now))]
    assert not e.standing, "the leader is alive: no stand"


def test_a_higher_term_vote_request_calls_off_our_own_stand():
    e = core()
    now, out = until_pre_vote(e, follower())
    grant(e, out, now, follower())
    assert e.standing
    later = now + T.election_max + 0.01
    vote = {"type": "request_vote", "term": 4}
    assert e.on_raft("c", VOTE_REQUEST, 4, vote, later, follower()) == [Deliver("c", VOTE_REQUEST, 4, vote)]
    assert not e.standing and e.round is None, "it votes instead of disrupting that election"


def test_a_node_ahead_of_the_leader_says_so_and_the_leader_adopts_its_term_behind_the_fence():
    # pysyncobj drops an AppendEntries of an older term silently: without this a node whose term
    # ran ahead (a candidate that lost reached it) is locked out while the leader lives.
    ahead = core()
    append = {"type": "append_entries", "term": 3}
    state = RaftState(4, FOLLOWER, None, 10, 3, PEERS)
    out = ahead.on_raft("a2", APPEND, 3, append, 5.0, state)
    assert out == [Deliver("a2", APPEND, 3, append), Send("a2", TermAhead(4))]
    assert ahead.on_raft("a2", APPEND, 3, append, 5.05, state) == [Deliver("a2", APPEND, 3, append)], \
        "told once per election timeout"
    leader = core()
    leading = RaftState(3, LEADER, "a", 10, 3, PEERS)
    assert leader.on_message("b", TermAhead(4), 6.0, leading) == [Fence(4)]
    assert leader.fence_done(4) == [Release((AdoptTerm(4),))]
    assert leader.on_message("b", TermAhead(3), 6.0, leading) == [], "not ahead"
    assert core().on_message("b", TermAhead(9), 6.0, follower(term=3)) == [AdoptTerm(9)]


def test_a_term_ahead_that_arrives_while_a_vote_request_is_fenced_waits_behind_it():
    # A leadership transfer: the candidate's vote request reaches the leader (fenced), then the
    # candidate's TermAhead, answering the leader's heartbeat. A second fence must not replace the
    # first and drop the vote request: the leader would adopt the term without voting, and the
    # candidate, whose other voter's guard ignored it, would lose (test_processes' step-down).
    e = core(now=0.0)
    leading = RaftState(3, LEADER, "a", 10, 3, PEERS)
    vote = {"type": "request_vote", "term": 4}
    assert e.on_raft("c", VOTE_REQUEST, 4, vote, 5.0, leading) == [Fence(4)]
    assert e.on_message("c", TermAhead(4), 5.001, leading) == [], "no second fence"
    assert e.fence_done(4) == [Release((Deliver("c", VOTE_REQUEST, 4, vote), AdoptTerm(4)))]
