from __future__ import annotations

import json

import pytest

from cluster.config import Address, ConfigError, NodeConfig, Timing
from cluster.lease import LeaseTracker, VoteGuard, majority


def test_majority():
    assert [majority(n) for n in (1, 2, 3, 4, 5)] == [1, 2, 2, 3, 3]


def test_quorum_stamp_is_the_newest_stamp_a_majority_acked():
    t = LeaseTracker("a", 0.15)
    t.reset(3)
    five = frozenset("abcde")
    t.on_ack("b", 3, 5.0, 5.1)
    assert t.quorum_stamp(five) is None
    t.on_ack("c", 3, 4.0, 5.1)
    assert t.quorum_stamp(five) == 4.0       # a + b + c
    t.on_ack("d", 3, 4.5, 5.2)
    assert t.quorum_stamp(five) == 4.5       # a + b + d
    assert t.expiry(five) == pytest.approx(4.65)
    assert not t.on_ack("e", 2, 9.0, 9.0), "another term"
    t.on_ack("b", 3, 1.0, 9.0)
    assert t.stamps["b"] == 5.0, "stamps never go back"


def test_single_node_cluster_always_has_quorum():
    t = LeaseTracker("a", 0.15)
    assert t.expiry(frozenset("a")) == float("inf")


def test_vote_guard():
    g = VoteGuard(guard=0.18, started_at=0.0, startup_quiet=0.4)
    assert not g.allows_vote(0.3, False), "quiet after start: we may have forgotten a vote"
    assert g.allows_vote(0.5, False)
    g.on_leader_contact(1.0)
    assert not g.allows_vote(1.17, False)
    assert g.allows_vote(1.181, False)
    assert g.allows_vote(1.01, True), "a leader must hear higher terms to step down"


def test_default_timing_is_safe_and_unsafe_timing_is_refused():
    Timing().validate()
    with pytest.raises(ConfigError, match="lease"):
        Timing(lease=0.18).validate()
    with pytest.raises(ConfigError, match="vote_guard"):
        Timing(vote_guard=0.3).validate()
    with pytest.raises(ConfigError):
        Timing(election_min=0.1).validate()


def test_group_timers_default_to_the_election_timeout_and_ten_seconds():
    t = Timing()
    assert (t.group_suspect, t.rebalance_quiet) == (t.election_min, 10.0)
    slow = Timing(heartbeat=0.1, election_min=0.8, election_max=1.6, vote_guard=0.7, lease=0.6,
                  connection_timeout=2.0, keepalive=0.4)
    assert slow.validate().group_suspect == 0.8, "follows election-min when not set"
    assert Timing(group_suspect=0.15).validate().group_suspect == 0.15


@pytest.mark.parametrize("over, match", [
    ({"group_suspect": 0.05}, "group_suspect"),     # = heartbeat: live members look silent between beats
    ({"group_suspect": 0.25}, "group_suspect"),     # > election_min: a new leader would wait for the old one's groups
    ({"rebalance_quiet": 0.75}, "rebalance_quiet"),  # = suspect + debounce
])
def test_group_timers_are_checked(over, match):
    with pytest.raises(ConfigError, match=match):
        Timing(**over).validate()


def test_group_timers_are_configurable_and_round_trip():
    cfg = NodeConfig.from_dict(_doc(timing={"group-suspect": 0.15, "rebalance-quiet": 30}))
    assert (cfg.timing.group_suspect, cfg.timing.rebalance_quiet) == (0.15, 30.0)
    assert NodeConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def _doc(**over):
    d = {"cluster": "c", "secret": "s", "self": "n1",
         "nodes": [{"name": "n1", "raft": "127.0.0.1:1001", "stream": "127.0.0.1:2001"},
                   {"name": "n2", "raft": "127.0.0.1:1002"}],
         "links": {"n1->n2": {"raft": "127.0.0.1:9012"}},
         "timing": {"lease": 0.1}}
    d.update(over)
    return d


def test_config_parses_links_and_dials_per_directed_link():
    cfg = NodeConfig.from_dict(_doc())
    assert cfg.cluster.dial_raft("n1", "n2") == Address("127.0.0.1", 9012)
    assert cfg.cluster.dial_raft("n2", "n1") == Address("127.0.0.1", 1001)
    assert cfg.cluster.dial_stream("n2", "n1") == Address("127.0.0.1", 2001)
    assert cfg.timing.lease == 0.1
    assert NodeConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


def test_config_from_toml_file(tmp_path):
    (tmp_path / "secret").write_text("s3\n")
    (tmp_path / "n.toml").write_text(
        'cluster = "c"\nsecret-file = "secret"\nself = "a"\n'
        '[[nodes]]\nname = "a"\nraft = "127.0.0.1:1"\n'
        '[[nodes]]\nname = "b"\nraft = "127.0.0.1:2"\n'
        '[links."a->b"]\nraft = "127.0.0.1:3"\n'
        '[node]\nhistory = "h.jsonl"\n')
    cfg = NodeConfig.load(tmp_path / "n.toml")
    assert cfg.cluster.secret == "s3" and cfg.history_path == "h.jsonl"
    assert cfg.cluster.dial_raft("a", "b").port == 3


@pytest.mark.parametrize("bad, match", [
    ({"secret": ""}, "secret"),
    ({"self": "n9"}, "self"),
    ({"nodes": [{"name": "n1", "raft": "x"}]}, "host:port"),
    ({"links": {"n1n2": {}}}, "n1->n2"),
    ({"timing": {"leese": 1}}, "unknown"),
    ({"colour": 1}, "unknown"),
    ({"nodes": [{"name": "n1", "raft": "127.0.0.1:1"}, {"name": "n1", "raft": "127.0.0.1:2"}]}, "duplicate"),
    ({"replication": {"gather-ms": -1}}, "gather-ms"),
    ({"replication": {"gather-ms": 1.5}}, "gather-ms"),
    ({"groups": 0}, "groups must be a whole number from 1 to 255"),
    ({"groups": 256}, "groups must be"),
    ({"groups": True}, "groups must be"),
    ({"groups": "3"}, "groups must be"),
])
def test_config_errors(bad, match):
    with pytest.raises(ConfigError, match=match):
        NodeConfig.from_dict(_doc(**bad))


def test_groups_default_to_one_and_round_trip():
    one = NodeConfig.from_dict(_doc())
    assert one.cluster.groups == 1 and "groups" not in one.to_dict()   # a one-group file reads as before
    three = NodeConfig.from_dict(_doc(groups=3))
    assert three.cluster.groups == 3 and three.to_dict()["groups"] == 3
    assert NodeConfig.from_dict(json.loads(json.dumps(three.to_dict()))) == three


def test_the_gather_is_on_by_default_and_can_be_set_or_turned_off():
    assert NodeConfig.from_dict(_doc()).cluster.replication.gather_ms == 2
    for ms in (0, 5):
        assert NodeConfig.from_dict(_doc(replication={"gather-ms": ms})).cluster.replication.gather_ms == ms


def test_address_parse_and_str():
    assert str(Address.parse("127.0.0.1:80")) == "127.0.0.1:80"
    assert Address.parse("[::1]:80") == Address("::1", 80)
    assert str(Address("::1", 80)) == "[::1]:80"
    with pytest.raises(ConfigError):
        Address.parse("localhost:http")
