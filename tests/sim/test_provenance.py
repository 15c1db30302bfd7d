"""sim/provenance.py: every entry a member holds is what its written epoch's master wrote there."""

from __future__ import annotations

import inspect
import textwrap
from types import SimpleNamespace

from cluster import decisions
from cluster.replication import master as master_mod
from cluster.replication import replica as replica_mod
from cluster.replication.log import Entry, ReplicationLog
from cluster.replication.messages import Batch
from sim import generate, simulate
from sim.mutants import BY_NAME, SETTINGS
from sim.provenance import ProvenanceCheck


def _node(log: ReplicationLog) -> SimpleNamespace:
    return SimpleNamespace(core=SimpleNamespace(groups=[SimpleNamespace(index=0, replication=SimpleNamespace(log=log))]))


def test_an_entry_relabelled_with_a_newer_epoch_or_other_mutations_fails_and_a_faithful_copy_passes():
    with decisions.recording():
        decisions.wrote(2, 1, b"a")
        decisions.wrote(2, 2, b"b")
        decisions.wrote(3, 3, b"c")
        faithful, relabelled, altered = ReplicationLog(), ReplicationLog(), ReplicationLog()
        for e in (Entry(1, 2, b"a", 0), Entry(2, 2, b"b", 0), Entry(3, 3, b"c", 0)):
            faithful.append(e)
        relabelled.append(Entry(1, 2, b"a", 0))
        relabelled.append(Entry(2, 3, b"b", 0))     # written in epoch 2, resent as epoch 3's
        altered.append(Entry(1, 2, b"x", 0))
        check = ProvenanceCheck()
        check.scan(1.0, {"n1": _node(faithful)})
        assert check.failures == [] and check.entries_checked == 3
        check.scan(2.0, {"n1": _node(faithful), "n2": _node(relabelled), "n3": _node(altered)})
    assert check.entries_checked == 6      # n1's entries are looked at once
    assert check.failures == [
        "provenance: n2 holds seq 2 as written in epoch 3, where that epoch's master wrote nothing (at 2.000000 s)",
        "provenance: n3 holds seq 1 as written in epoch 2, where that epoch's master wrote other mutations "
        "(at 2.000000 s)"]


def test_a_log_reset_behind_what_was_seen_or_replaced_is_looked_at_again():
    with decisions.recording():
        decisions.wrote(1, 1, b"a")
        decisions.wrote(1, 2, b"b")
        log = ReplicationLog()
        log.append(Entry(1, 1, b"a", 0))
        log.append(Entry(2, 1, b"b", 0))
        check = ProvenanceCheck()
        check.scan(1.0, {"n1": _node(log)})
        log.reset(0, 0)                             # a transfer from an older position
        log.append(Entry(1, 1, b"a", 0))
        check.scan(2.0, {"n1": _node(log)})
        fresh = ReplicationLog()                     # a restart: another log object
        fresh.append(Entry(1, 1, b"z", 0))
        check.scan(3.0, {"n1": _node(fresh)})
    assert check.entries_checked == 4
    assert len(check.failures) == 1 and "wrote other mutations (at 3.000000 s)" in check.failures[0]


def test_the_simulator_finds_resent_entries_relabelled_and_passes_the_same_seed_without_the_bug(monkeypatch):
    """resend-rewrites-epoch (sim/mutants.py): a master resends older entries claiming its own
    epoch. A run's end state does not show it; this check finds it at seed 0."""
    sc = generate(0, **SETTINGS)
    assert simulate(sc).ok
    m = BY_NAME["resend-rewrites-epoch"]
    old, new = m.old.splitlines()[0], m.new.splitlines()[0]
    src = inspect.getsource(master_mod.MasterReplicator._send_from)
    assert src.count(old) == 1
    ns: dict = {}
    exec(compile(textwrap.dedent(src.replace(old, new)), master_mod.__file__, "exec"), master_mod.__dict__, ns)
    monkeypatch.setattr(master_mod.MasterReplicator, "_send_from", ns["_send_from"])
    failures = simulate(sc).failures
    assert any(f.startswith("provenance: ") for f in failures), failures


def test_a_batch_sent_relabelled_fails_as_it_leaves():
    with decisions.recording():
        decisions.wrote(4, 7, b"m")
        check = ProvenanceCheck()
        check.frame(1.0, "n1", "n2", Batch(5, 7, 4, b"m"))     # a resend by epoch 5's master
        assert check.failures == []
        check.frame(2.0, "n2", "n1", Batch(5, 7, 5, b"m"))     # a fetch's answer, relabelled
    assert check.frames_checked == 2
    assert check.failures == ["provenance: n2 sent n1 seq 7 as written in epoch 5, where that epoch's "
                              "master wrote nothing (at 2.000000 s)"]


def test_the_simulator_finds_fetched_entries_relabelled_though_no_log_keeps_them(monkeypatch):
    """fetch-rewrites-epoch (sim/mutants.py): a member answers a syncing master's fetch with its
    entries claiming the current epoch. The syncing master then sees its own last entry with
    another epoch and takes a transfer instead (safe, a transfer too many): no log ever holds
    the copies, which only the frame check sees (at seed 0)."""
    sc = generate(0, **SETTINGS)
    assert simulate(sc).ok
    m = BY_NAME["fetch-rewrites-epoch"]
    src = inspect.getsource(replica_mod.answer_sync)
    assert src.count(m.old) == 1
    ns: dict = {}
    exec(compile(textwrap.dedent(src.replace(m.old, m.new)), replica_mod.__file__, "exec"), replica_mod.__dict__, ns)
    monkeypatch.setattr(replica_mod, "answer_sync", ns["answer_sync"])
    failures = simulate(sc).failures
    assert any(f.startswith("provenance: ") and " sent " in f for f in failures), failures
