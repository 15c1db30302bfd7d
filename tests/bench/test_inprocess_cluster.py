"""bench/inprocess_cluster.py: three members' real glue and cores in one process, which
``python -m bench.cpu_profile``'s cluster phase counts instructions of. A count is only worth
something if the path is the served one: a send is answered after a replica acked it, not
before, and every member ends up holding the same state."""

from __future__ import annotations

import json
from pathlib import Path

from storage.commands import CreateQueue, Namespace, SendMessage

from bench.cpu_profile import CLUSTER_BATCH, _inside
from bench.inprocess_cluster import InProcessCluster


def test_a_send_is_answered_once_a_replica_acked_and_every_member_holds_it():
    cluster = InProcessCluster("majority")
    master = cluster.elect("n1")
    assert master.serving and not cluster.nodes["n2"].serving
    answers: list = []
    backend = cluster.backends["n1"]
    backend.execute(CreateQueue(Namespace(), "q"), lambda result, err: answers.append(err))
    cluster.settle()
    backend.execute(SendMessage(Namespace().key("q"), "hello"), lambda result, err: answers.append(err))
    cluster.run_due()                       # the master cuts the batch and streams it
    assert answers == [None], "not answered before a replica has it"
    cluster.deliver(("n2", "n3"))           # the replicas apply it and ack
    assert answers == [None], "the acks are still on the wire"
    cluster.deliver(("n1",))
    assert answers == [None, None]
    digests = {n: node.storage.digest() for n, node in cluster.nodes.items()}
    assert len(set(digests.values())) == 1, digests


def test_the_cluster_phase_measures_each_round_trip_in_three_parts(tmp_path: Path):
    manifest = tmp_path / "phases.json"
    _inside(["noop", "cluster_json"], 60, manifest)   # outside valgrind the loops just run
    done = json.loads(manifest.read_text())
    assert done[0] == ["noop", 60, 60]
    parts = done[1:]
    assert len(parts) == 3 * 4 and parts[:3] == [["master_json", CLUSTER_BATCH, 1],
                                                  ["replica_json", 2 * CLUSTER_BATCH, 1], ["master_json", 0, 1]]
