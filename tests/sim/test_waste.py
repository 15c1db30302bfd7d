"""sim/waste.py: no frame of an ended view, and no ack held longer than its journal needs."""

from __future__ import annotations

import inspect
import textwrap
from types import SimpleNamespace

from cluster import group_core as group_core_mod
from cluster.replication import core as core_mod
from cluster.replication.messages import Ack, Batch, SnapshotAck, SnapshotChunk, SyncRequest
from sim import generate, simulate
from sim.mutants import BY_NAME, SETTINGS
from sim.waste import WasteCheck


def _chunk(epoch: int) -> SnapshotChunk:
    return SnapshotChunk(epoch=epoch, transfer_id=1, index=0, at_seq=5, at_epoch=epoch, records=b"", last=False)


def _in_view(epoch: int | None) -> SimpleNamespace:
    return SimpleNamespace(core=SimpleNamespace(groups=[SimpleNamespace(replication=SimpleNamespace(epoch=epoch))]))


def _replica(name: str, master: str, epoch: int, durable: int | None) -> SimpleNamespace:
    rep = SimpleNamespace(role="replica", master=master, epoch=epoch, durable_seq=durable)
    return SimpleNamespace(name=name, core=SimpleNamespace(groups=[SimpleNamespace(replication=rep)]))


def test_a_frame_of_an_older_epoch_than_the_senders_view_fails_but_a_late_held_ack_passes():
    check = WasteCheck()
    check.frame(1.0, "n1", _in_view(4), _chunk(4))
    check.frame(1.0, "n1", _in_view(None), _chunk(3))    # no view installed yet: nothing to judge by
    check.frame(1.0, "n2", _in_view(4), Ack(3, 17))      # to a master that may still be in 3
    check.frame(1.0, "n2", _in_view(4), SnapshotAck(3, 1, 0))
    check.frame(1.0, "n2", _in_view(4), Batch(4, 7, 3, b"m"))    # an entry written in 3, sent in 4's stream
    assert check.failures == []
    check.frame(2.0, "n1", _in_view(4), _chunk(3))
    check.frame(2.5, "n3", _in_view(5), SyncRequest(4, -1))
    assert check.frames_checked == 7
    assert check.failures == [
        "waste: n1 sent SnapshotChunk(epoch 3) while in the view of epoch 4 (its master refuses it) at 2.000000 s",
        "waste: n3 sent SyncRequest(epoch 4) while in the view of epoch 5 (its master refuses it) at 2.500000 s",
    ]


def test_a_journal_report_must_be_acked_by_the_next_turns_end():
    check = WasteCheck()
    n2 = _replica("n2", "n1", 3, 12)
    check.journal_report(n2, Ack(3, 15), 10)         # durable 10 -> 12, of 15 held: 12 is owed
    check.frame(1.0, "n2", _in_view(3), Ack(3, 12))
    check.flushed(1.0, n2)
    assert check.failures == [] and check.reports_checked == 1
    n2.core.groups[0].replication.durable_seq = 14
    check.journal_report(n2, Ack(3, 15), 12)
    check.flushed(2.0, n2)                           # held on for the next fsync
    assert check.failures == ["waste: n2's journal holds n1's log up to seq 14 of epoch 3, and the turn that "
                              "learnt it acked only up to 12 (held for the next fsync) at 2.000000 s"]


def test_a_report_owes_nothing_when_nothing_held_became_durable_or_the_view_moved_on():
    check = WasteCheck()
    n2 = _replica("n2", "n1", 3, 12)
    check.journal_report(n2, None, 10)               # nothing held back
    check.journal_report(n2, Ack(3, 9), 10)          # held ack already covered
    check.journal_report(n2, Ack(2, 15), 10)         # held for an ended view's master
    check.flushed(1.0, n2)
    check.journal_report(n2, Ack(3, 15), 10)
    n2.core.groups[0].replication.epoch = 4          # the view changed before the turn ended
    check.flushed(2.0, n2)
    assert check.failures == [] and check.reports_checked == 0


def _failures_with(monkeypatch, sc, name: str, module, owner, function: str) -> list[str]:
    """``sc`` passes on clean code; its failures with mutant ``name`` applied to ``function``."""
    assert simulate(sc).ok
    m = BY_NAME[name]
    src = inspect.getsource(getattr(owner, function))
    assert src.count(m.old) == 1
    ns: dict = {}
    exec(compile(textwrap.dedent(src.replace(m.old, m.new)), module.__file__, "exec"), module.__dict__, ns)
    monkeypatch.setattr(owner, function, ns[function])
    return simulate(sc).failures


def test_the_simulator_finds_an_ack_held_for_the_next_fsync_and_passes_the_same_seed_without_the_bug(monkeypatch):
    """held-ack-unclamped (sim/mutants.py): a replica holds back all of an ack until all of it
    is durable. Nothing is lost, every operation completes an fsync later: without the
    wasted-work rule no seed within 300 finds it; with it, seed 0 does."""
    failures = _failures_with(monkeypatch, generate(0, **SETTINGS), "held-ack-unclamped", group_core_mod,
                              group_core_mod.GroupCore, "persisted")
    assert any(f.startswith("waste: ") and "(held for the next fsync)" in f for f in failures), failures


def test_the_simulator_finds_a_transfer_kept_across_a_view_change_and_passes_the_same_seed_without_the_bug(monkeypatch):
    """view-keeps-any-transfer (sim/mutants.py): a member keeps sending an older epoch's
    snapshot to the master of a new view, whose receiver refuses every chunk. Without
    the wasted-work rule no seed within 300 finds it; with it, seed 24 does."""
    failures = _failures_with(monkeypatch, generate(24, **SETTINGS), "view-keeps-any-transfer", core_mod,
                              core_mod.ReplicationCore, "install_view")
    assert any(f.startswith("waste: ") and "SnapshotChunk" in f for f in failures), failures


def test_the_simulator_finds_a_newer_batch_displacing_a_journal_reports_part_at_a_pinned_60_second_seed(monkeypatch):
    """durable-part-displaced (sim/mutants.py): a new batch's ack, in the turn of a journal
    report whose part waits for the flush, takes the part's place; held for the journal, it
    sends nothing, and the part waits for the next fsync. 60-second seeds 129, 227 and 275 reach
    the race; of the mutant search's 30-second seeds, the first is FOUND_AT's."""
    sc = generate(275, nodes=None, policy=None, crash_policy="any", duration=60.0)
    failures = _failures_with(monkeypatch, sc, "durable-part-displaced", group_core_mod,
                              group_core_mod.GroupCore, "_replication")
    assert any(f.startswith("waste: ") and "(held for the next fsync)" in f for f in failures), failures
