"""A small DSL for hand-written histories: one method per record kind, sensible defaults."""

from __future__ import annotations

from typing import Any

from cluster.checker import ClientOp, DigestRecord, History, NemesisEvent, NodeEvent, ReceivedMessage


class H:
    def __init__(self, queue: str = "q") -> None:
        self.queue = queue
        self.records: list[Any] = []
        self.n = 0
        self.mids: dict[str, str] = {}
        self.seqs: dict[str, str] = {}
        self.groups: dict[str, str] = {}
        self.receipts: dict[str, int] = {}

    def _id(self, client: str) -> str:
        self.n += 1
        return f"{client}-{self.n}"

    def send(self, token: str, t0: float, t1: float | None = None, outcome: str = "ok", *, client: str = "p",
             group: str | None = None, mid: str | None = None, seq: int | None = None, queue: str | None = None,
             node: str = "n1") -> ClientOp:
        t1 = t0 + 0.01 if t1 is None else t1
        mid = mid or f"m-{token}"
        self.mids.setdefault(token, mid)
        if group is not None:
            self.groups[token] = group
        if seq is not None:
            self.seqs[token] = str(seq)
        ok = outcome == "ok"
        op = ClientOp(t0, node, client, self._id(client), "send", queue or self.queue, outcome, t1,
                      token=token, body=f"body {token}", group=group,
                      message_id=mid if ok else None, seq=str(seq) if ok and seq is not None else None)
        self.records.append(op)
        return op

    def msg(self, token: str, receipt: str | None = None, mid: str | None = None) -> ReceivedMessage:
        if receipt is None:
            k = self.receipts.get(token, 0) + 1
            self.receipts[token] = k
            receipt = f"r-{token}-{k}"
        return ReceivedMessage(mid or self.mids.get(token, f"m-{token}"), token, receipt,
                               self.groups.get(token), self.seqs.get(token))

    def recv(self, t0: float, t1: float | None, *msgs: str | ReceivedMessage, vt: float = 30.0,
             client: str = "c1", outcome: str = "ok", queue: str | None = None, node: str = "n1",
             phase: str | None = None) -> ClientOp:
        t1 = t0 + 0.01 if t1 is None else t1
        ms = tuple(self.msg(m) if isinstance(m, str) else m for m in msgs)
        op = ClientOp(t0, node, client, self._id(client), "receive", queue or self.queue, outcome, t1,
                      visibility_timeout=vt, max_messages=10, messages=ms if outcome == "ok" else (),
                      phase=phase)
        self.records.append(op)
        return op

    def delete(self, receipt: str, t0: float, t1: float | None = None, outcome: str = "ok", *,
               client: str = "c1", queue: str | None = None) -> ClientOp:
        t1 = t0 + 0.01 if t1 is None else t1
        op = ClientOp(t0, "n1", client, self._id(client), "delete", queue or self.queue, outcome, t1, receipt=receipt)
        self.records.append(op)
        return op

    def cv(self, receipt: str, vt: float, t0: float, t1: float | None = None, outcome: str = "ok", *,
           client: str = "c1", queue: str | None = None) -> ClientOp:
        t1 = t0 + 0.01 if t1 is None else t1
        op = ClientOp(t0, "n1", client, self._id(client), "change_visibility", queue or self.queue, outcome, t1,
                      receipt=receipt, visibility_timeout=vt)
        self.records.append(op)
        return op

    def node(self, ts: float, node: str, event: str, **fields: Any) -> NodeEvent:
        e = NodeEvent(ts, node, event, fields)
        self.records.append(e)
        return e

    def digest(self, ts: float, node: str, digest: str, master: str | None = None) -> DigestRecord:
        d = DigestRecord(ts, node, digest, master)
        self.records.append(d)
        return d

    def kill(self, ts: float, node: str) -> NemesisEvent:
        n = NemesisEvent(ts, node, "kill")
        self.records.append(n)
        return n

    def history(self) -> History:
        return History.of(self.records)
