"""The JSON-lines schema: typed records round-trip, a directory of many writers loads as one
history, torn and foreign lines are tolerated."""

from __future__ import annotations

import json

import pytest

from cluster.checker import (ClientOp, DigestRecord, History, NemesisEvent, NodeEvent, ReceivedMessage,
                             check_dir, load_dir, parse_lines, record_from_json, to_line,
                             write_records)
from cluster.history import HistoryWriter

SAMPLES = [
    ClientOp(1.5, "n2", "c1", "c1-1", "send", "q.fifo", "ok", 1.6, token="t1", body="hello t1", group="g",
             dedup="t1", message_id="m1", seq="00000000000000000001"),
    ClientOp(1.7, "n1", "c1", "c1-2", "send", "q", "unknown", None, error="timeout", token="t2"),
    ClientOp(2.0, "n1", "c2", "c2-1", "receive", "q", "ok", 2.25, visibility_timeout=30.0, max_messages=10,
             messages=(ReceivedMessage("m1", "t1", "r1", "g", "1", 2, 12.5), ReceivedMessage("m9", None, "r9"))),
    ClientOp(2.5, "n1", "c2", "c2-2", "delete", "q", "failed", 2.6, error="ReceiptHandleIsInvalid",
             receipt="r1", message_id="m1", token="t1"),
    ClientOp(2.7, "n3", "c2", "c2-3", "change_visibility", "q", "ok", 2.8, receipt="r9", visibility_timeout=0.0,
             phase="drain"),
    DigestRecord(9.0, "n1", "abc123", master="n1", view_id=4),
    DigestRecord(9.0, "n2", "abc123"),
    NemesisEvent(3.0, "n1", "kill", detail="SIGKILL"),
    NemesisEvent(4.0, "", "partition"),
    NodeEvent(0.5, "n1", "view", {"view_id": 1, "members": ["n1", "n2", "n3"], "master": "n1", "epoch": 1}),
    NodeEvent(0.6, "n1", "replication_ack", {"peer": "n2", "seq": 17}),   # an event kind this reader doesn't know
]


@pytest.mark.parametrize("rec", SAMPLES, ids=lambda r: f"{r.event}")
def test_record_round_trip(rec):
    line = to_line(rec)
    d = json.loads(line)
    assert {"ts", "node", "event"} <= d.keys()
    assert record_from_json(d) == rec
    assert type(record_from_json(d)) is type(rec)


def test_optional_fields_are_omitted():
    d = SAMPLES[1].to_json()
    assert "completed" not in d and "messages" not in d and "message_id" not in d
    assert d["outcome"] == "unknown" and SAMPLES[1].end == float("inf")


def test_validation_of_kinds_and_outcomes():
    with pytest.raises(ValueError):
        ClientOp(1.0, "n1", "c", "c-1", "publish", "q", "ok")
    with pytest.raises(ValueError):
        ClientOp(1.0, "n1", "c", "c-1", "send", "q", "maybe")


def test_directory_of_many_writers_loads_as_one_history(tmp_path):
    # One writer: a node writes its events, clients and the nemesis their typed records.
    node = HistoryWriter(str(tmp_path / "n1.history.jsonl"), "n1")
    node.write("started", 0.1, raft="127.0.0.1:1", members=["n1", "n2", "n3"])
    node.write("activated", 0.2, reason="elected", term=1, view_id=1, epoch=1)
    node.close()
    sub = tmp_path / "clients"
    sub.mkdir()
    with HistoryWriter(sub / "c1.jsonl") as w:
        for r in SAMPLES[:2]:
            w.write_record(r)
    write_records(sub / "c2.jsonl", SAMPLES[2:5])
    write_records(tmp_path / "rest.ndjson", SAMPLES[5:])
    with open(sub / "c1.jsonl", "a") as f:
        f.write('{"ts": 99.0, "node": "n1", "event": "client_op", "cli')   # torn by a kill
    (tmp_path / "notes.txt").write_text("not a history\n")
    h = load_dir(tmp_path)
    assert sorted(h.ops, key=lambda o: o.ts) == sorted(SAMPLES[:5], key=lambda o: o.ts)
    assert list(h.ops) == sorted(h.ops, key=lambda o: o.ts)
    assert set(h.digests) == set(SAMPLES[5:7]) and set(h.nemesis) == set(SAMPLES[7:9])
    assert [e.event for e in h.node_events] == ["started", "activated", "view", "replication_ack"]
    assert h.node_events[1].get("term") == 1
    assert h.end == 9.0
    # And round-trips again through one file.
    write_records(tmp_path / "all.out", h.records())
    again = History.of(parse_lines(open(tmp_path / "all.out")))
    assert again == h
    v = check_dir(tmp_path)
    assert v.queues["q"].attempted == 1 and v.queues["q.fifo"].attempted == 1
    assert v.active_intervals[0].node == "n1" and v.active_intervals[0].closed_by == "kill"


def test_garbage_lines_are_skipped():
    lines = ["", "   ", "[1, 2]", '{"no": "ts"}', "{bad json", '{"ts": 1, "event": "client_op", "op": "send"}',
             to_line(SAMPLES[0])]
    assert list(parse_lines(lines)) == [SAMPLES[0]]


def test_invocation_line_is_superseded_by_the_final_line():
    start = ClientOp(1.0, "n1", "c1", "c1-1", "send", "q", "unknown", None, token="t")
    final = ClientOp(1.0, "n1", "c1", "c1-1", "send", "q", "ok", 1.2, token="t", message_id="m")
    other = ClientOp(2.0, "n1", "c1", "c1-2", "send", "q", "unknown", None, token="u")
    assert History.of([start, final, other]).ops == (final, other)
    assert History.of([final, start, other]).ops == (final, other)   # files read in any order


def test_history_lines_are_on_disk_at_once_unless_the_writer_batches_them(tmp_path):
    path = tmp_path / "n1.history.jsonl"
    node = HistoryWriter(str(path), "n1")
    node.write("activated", 0.2, reason="elected", term=1, view_id=1, epoch=1)
    assert path.read_text().count("\n") == 1, "flushed at once: a SIGKILL right after keeps it"
    node.write("op", 0.3, flush=False, outcome="ok", action="SendMessage", queue="q")
    node.write("op", 0.4, flush=False, outcome="ok", action="SendMessage", queue="q")
    assert path.read_text().count("\n") == 1, "batched op lines wait for the flush"
    node.flush()
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["event"] for x in lines] == ["activated", "op", "op"] and lines[2]["ts"] == 0.4
    node.close()
