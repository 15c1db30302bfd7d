"""cluster/forwards.py: the requests a member forwarded, driven directly. How the node core
composes the table (routes, links, views) is tests/cluster/test_node_core.py's."""

from __future__ import annotations

import pytest

from cluster.forwards import FORWARD_TIMEOUT_S, Forwards
from cluster.node_actions import ForwardAnswered, ForwardFailed
from cluster.replication.messages import Forward, ForwardReply, Send


def test_a_request_is_answered_once_and_only_by_the_master_it_went_to():
    f = Forwards()
    tok = object()
    send = f.send(tok, "n1", b"request", 10.0)
    assert send == Send("n1", Forward(send.frame.request_id, b"request")) and len(f) == 1
    out: list = []
    f.answered("n2", ForwardReply(send.frame.request_id, b"forged"), out)
    assert out == [] and len(f) == 1
    f.answered("n1", ForwardReply(send.frame.request_id, b"response"), out)
    f.answered("n1", ForwardReply(send.frame.request_id, b"response"), out)
    assert out == [ForwardAnswered(tok, b"response")] and len(f) == 0


def test_each_request_gets_its_own_id():
    f = Forwards()
    a, b = f.send(object(), "n1", b"a", 0.0), f.send(object(), "n1", b"b", 0.0)
    assert a.frame.request_id != b.frame.request_id


@pytest.mark.parametrize("event, peer, failed, reason", [
    ("master_changed", "n2", 0, "the master changed from n1 to n2"),   # what went to another master
    ("link_lost", "n2", 1, "the connection to the master n2 was lost"),   # what went over the link
])
def test_a_new_master_or_a_lost_link_fails_only_the_requests_it_concerns(event, peer, failed, reason):
    f = Forwards()
    toks = [object(), object()]
    f.send(toks[0], "n1", b"a", 0.0)
    f.send(toks[1], "n2", b"b", 0.0)
    out: list = []
    getattr(f, event)(peer, out)
    assert out == [ForwardFailed(toks[failed], reason, sent=True)] and len(f) == 1


def test_a_view_of_groups_fails_only_what_went_to_a_member_that_masters_no_group_in_it():
    # n3 died mastering group 2, and the view gave that group to n1: what was forwarded to n3 will
    # never be answered (without this it waits for the link's timeout); n1 and n2 still master a
    # group, and a group that moved away from one of them gets a refusal from it, so theirs stay
    f = Forwards()
    toks = [object(), object(), object()]
    for tok, master in zip(toks, ("n1", "n2", "n3")):
        f.send(tok, master, b"x", 0.0)
    out: list = []
    f.masters_changed(frozenset({"n1", "n2"}), out)
    assert out == [ForwardFailed(toks[2], "n3 masters no replication group any more", sent=True)] and len(f) == 2


def test_an_unanswered_request_fails_at_the_timeout_as_sent():
    f = Forwards()
    tok = object()
    f.send(tok, "n1", b"a", 5.0)
    out: list = []
    f.expire(5.0 + FORWARD_TIMEOUT_S - 0.001, out)
    assert out == []
    f.expire(5.0 + FORWARD_TIMEOUT_S, out)
    assert out == [ForwardFailed(tok, "the master n1 did not answer within 30 s", sent=True)] and len(f) == 0


def test_a_stop_fails_everything_in_flight():
    f = Forwards()
    toks = [object(), object()]
    for i, tok in enumerate(toks):
        f.send(tok, f"n{i + 1}", b"x", 0.0)
    out: list = []
    f.stop("stopping", out)
    assert out == [ForwardFailed(tok, "stopping", sent=True) for tok in toks] and len(f) == 0
