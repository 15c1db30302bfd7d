"""Recording SQS clients (boto3) for process tests: every attempt goes to a history file in the
checker's schema (cluster/HISTORY.md), so cluster.checker decides what was lost or duplicated.

Each client is a thread with its own boto3 client per node and no SDK retries: the SDK would
hide attempts from the history. Outcomes: 200 -> ok; a 4xx that says the request did not happen
(throttled, no such queue, ...) -> failed; 5xx, timeouts and broken connections -> unknown (a
503 may come after the master executed the request). A send that did not come back ok is
retried by the client itself with the same token, as a new attempt.
"""

from __future__ import annotations

import http.client
import itertools
import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from cluster.checker.schema import ClientOp, DigestRecord, NemesisEvent, ReceivedMessage
from cluster.history import HistoryWriter

ACCOUNT = "000000000000"
VISIBILITY = 3   # short: messages a lost answer left in flight are back for the final drain


def sqs_client(url: str, timeout: float = 5.0, read_timeout: float | None = None):
    return boto3.client("sqs", endpoint_url=url, region_name="us-east-1", aws_access_key_id="x",
                        aws_secret_access_key="x",
                        config=Config(retries={"total_max_attempts": 1}, connect_timeout=timeout,
                                      read_timeout=timeout + 25 if read_timeout is None else read_timeout,
                                      tcp_keepalive=True))


def queue_url(base: str, queue: str) -> str:
    return f"{base}/{ACCOUNT}/{queue}"


def classify(e: Exception) -> tuple[str, str]:
    if isinstance(e, ClientError):
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        code = e.response.get("Error", {}).get("Code", "?")
        return ("unknown" if status >= 500 else "failed"), code
    return "unknown", type(e).__name__


@dataclass
class Recorder:
    """One client: sends unique tokens, receives and deletes, against whichever node
    ``pick_node`` names for each attempt."""

    name: str
    history: Path
    urls: Callable[[], dict[str, str]]            # node -> endpoint, of the nodes to use now
    queues: tuple[str, ...]
    seed: int = 0
    receive_ratio: float = 0.4
    # Of the messages received, this share gets ChangeMessageVisibility (0, 1 or 3 s: handed back
    # at once or soon) instead of a delete; the checker accounts for the new window.
    change_ratio: float = 0.1
    groups: int = 3
    # Seconds to wait for an answer before recording `unknown`; None: 30 s, past any long poll
    # and the forwarding timeout. A shorter one keeps a lost answer from stalling a short run.
    read_timeout: float | None = None
    acked_sends: list[str] = field(default_factory=list)
    ok_counts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._ops = itertools.count(1)
        self._tokens = itertools.count(1)
        self._clients: dict[str, object] = {}
        self._writer = HistoryWriter(self.history)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_receive_ok = True   # did the last receive get an answer (an empty one counts)?
        # A label the workload loop puts on every attempt (the scenario's phase: "slow", "cut", ...)
        self.phase: str | None = None

    # -- one attempt of each operation ------------------------------------------------------------

    def _client(self, url: str):
        c = self._clients.get(url)
        if c is None:
            c = self._clients[url] = sqs_client(url, read_timeout=self.read_timeout)
        return c

    def _node(self) -> tuple[str, str] | None:
        urls = self.urls()
        if not urls:
            return None
        node = self._rng.choice(sorted(urls))
        return node, urls[node]

    def _record(self, **kw) -> ClientOp:
        op = ClientOp(**kw)
        self._writer.write_record(op)
        if op.outcome == "ok":
            self.ok_counts[op.op] = self.ok_counts.get(op.op, 0) + 1
        return op

    def send(self, queue: str, token: str, node: str, url: str, group: str | None = None,
             phase: str | None = None) -> str:
        kw = {"QueueUrl": queue_url(url, queue), "MessageBody": token}
        if group is not None:
            kw.update(MessageGroupId=group, MessageDeduplicationId=token)
        t0 = time.time()
        try:
            r = self._client(url).send_message(**kw)
            self._record(ts=t0, node=node, client=self.name, op_id=f"{self.name}-{next(self._ops)}", op="send",
                         queue=queue, outcome="ok", completed=time.time(), token=token, body=token, group=group,
                         dedup=token if group else None, message_id=r["MessageId"],
                         seq=r.get("SequenceNumber"), phase=phase)
            self.acked_sends.append(token)
            return "ok"
        except (ClientError, BotoCoreError, OSError) as e:
            outcome, err = classify(e)
            self._record(ts=t0, node=node, client=self.name, op_id=f"{self.name}-{next(self._ops)}", op="send",
                         queue=queue, outcome=outcome, completed=time.time(), error=err, token=token, body=token,
                         group=group, dedup=token if group else None, phase=phase)
            return outcome

    def receive(self, queue: str, node: str, url: str, wait: int = 0, phase: str | None = None,
                visibility: int = VISIBILITY) -> list[ReceivedMessage]:
        t0 = time.time()
        try:
            r = self._client(url).receive_message(QueueUrl=queue_url(url, queue), MaxNumberOfMessages=10,
                                                  WaitTimeSeconds=wait, VisibilityTimeout=visibility,
                                                  MessageSystemAttributeNames=["All"])
        except (ClientError, BotoCoreError, OSError) as e:
            outcome, err = classify(e)
            self._record(ts=t0, node=node, client=self.name, op_id=f"{self.name}-{next(self._ops)}", op="receive",
                         queue=queue, outcome=outcome, completed=time.time(), error=err,
                         visibility_timeout=float(visibility), max_messages=10, phase=phase)
            self.last_receive_ok = False
            return []
        self.last_receive_ok = True
        msgs = tuple(ReceivedMessage(m["MessageId"], m["Body"], m["ReceiptHandle"],
                                     m.get("Attributes", {}).get("MessageGroupId"),
                                     m.get("Attributes", {}).get("SequenceNumber"),
                                     int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")))
                     for m in r.get("Messages", []))
        self._record(ts=t0, node=node, client=self.name, op_id=f"{self.name}-{next(self._ops)}", op="receive",
                     queue=queue, outcome="ok", completed=time.time(), visibility_timeout=float(visibility),
                     max_messages=10, messages=msgs, phase=phase)
        return list(msgs)

    def delete(self, queue: str, m: ReceivedMessage, node: str, url: str, phase: str | None = None) -> str:
        t0 = time.time()
        try:
            self._client(url).delete_message(QueueUrl=queue_url(url, queue), ReceiptHandle=m.receipt)
            outcome, err = "ok", None
        except (ClientError, BotoCoreError, OSError) as e:
            outcome, err = classify(e)
        self._record(ts=t0, node=node, client=self.name, op_id=f"{self.name}-{next(self._ops)}", op="delete",
                     queue=queue, outcome=outcome, completed=time.time(), error=err, receipt=m.receipt,
                     message_id=m.message_id, token=m.token, phase=phase)
        return outcome

    def change_visibility(self, queue: str, m: ReceivedMessage, node: str, url: str, timeout: int,
                          phase: str | None = None) -> str:
        t0 = time.time()
        try:
            self._client(url).change_message_visibility(QueueUrl=queue_url(url, queue), ReceiptHandle=m.receipt,
                                                        VisibilityTimeout=timeout)
            outcome, err = "ok", None
        except (ClientError, BotoCoreError, OSError) as e:
            outcome, err = classify(e)
        self._record(ts=t0, node=node, client=self.name, op_id=f"{self.name}-{next(self._ops)}",
                     op="change_visibility", queue=queue, outcome=outcome, completed=time.time(), error=err,
                     receipt=m.receipt, message_id=m.message_id, token=m.token,
                     visibility_timeout=float(timeout), phase=phase)
        return outcome

    # -- the workload loop --------------------------------------------------------------------------

    def step(self) -> None:
        picked = self._node()
        if picked is None:
            time.sleep(0.05)
            return
        node, url = picked
        queue = self._rng.choice(self.queues)
        phase = self.phase
        if self._rng.random() < self.receive_ratio:
            for m in self.receive(queue, node, url, phase=phase):
                if self._rng.random() < self.change_ratio:
                    self.change_visibility(queue, m, node, url, self._rng.choice((0, 1, 3)), phase=phase)
                else:
                    self.delete(queue, m, node, url, phase=phase)
            return
        token = f"{self.name}-t{next(self._tokens)}"
        # a retry is the same message: same token, group and deduplication id
        group = f"g{self._rng.randrange(self.groups)}" if queue.endswith(".fifo") else None
        for _ in range(5):   # the same token until an answer says it is in (or clearly is not)
            outcome = self.send(queue, token, node, url, group, phase=phase)
            if outcome == "ok":
                return
            time.sleep(0.05)
            picked = self._node()
            if picked is None:
                return
            node, url = picked

    def start(self) -> "Recorder":
        def run() -> None:
            while not self._stop.is_set():
                self.step()
        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        stop_all([self])

    def drain(self, node: str, url: str, rounds_empty: int = 2, deadline_s: float = 60.0,
              visible_at: float | None = None) -> int:
        """Receive and delete until every queue answers empty ``rounds_empty`` times in a row.
        A receive that failed says nothing about the queue: it does not count as empty (else a
        503 during the drain would leave messages behind and make them look lost).

        ``visible_at`` (a ``time.time()``): when every message a lost answer left in flight is
        visible again. Until then the queues are drained of what they show, and only from then
        on does the drain above begin: the wait for those messages overlaps the drain of the
        rest."""
        got = self._drain_until(node, url, visible_at) if visible_at is not None else 0
        deadline = time.monotonic() + deadline_s
        for queue in self.queues:
            empty = 0
            while empty < rounds_empty and time.monotonic() < deadline:
                msgs = self.receive(queue, node, url, wait=1, phase="drain")
                if not msgs:
                    if self.last_receive_ok:
                        empty += 1
                    else:
                        empty = 0
                        time.sleep(0.2)
                    continue
                empty = 0
                for m in msgs:
                    got += 1
                    self.delete(queue, m, node, url, phase="drain")
        return got

    def _drain_until(self, node: str, url: str, until: float) -> int:
        got = 0
        while time.time() < until:
            taken = 0
            for queue in self.queues:
                for m in self.receive(queue, node, url, phase="drain"):
                    taken += 1
                    self.delete(queue, m, node, url, phase="drain")
            got += taken
            if not taken:
                time.sleep(max(0.0, min(0.1, until - time.time())))
        return got

    def close(self) -> None:
        self._writer.close()


def stop_all(recorders: Iterable[Recorder]) -> None:
    """Every client stops, then each is waited for. One stopped after another would leave the
    others starting new attempts meanwhile, each of which may hang for its read timeout."""
    recorders = list(recorders)
    for r in recorders:
        r._stop.set()
    for r in recorders:
        if r._thread is not None:
            r._thread.join(60)


def record_digests(path: Path, digests: dict[str, tuple[str, str | None]]) -> None:
    with HistoryWriter(path) as w:
        for node, (digest, master) in digests.items():
            w.write_record(DigestRecord(time.time(), node, digest, master))


class Nemesis:
    def __init__(self, path: Path) -> None:
        self._w = HistoryWriter(path)

    def note(self, node: str, action: str, detail: str | None = None, ts: float | None = None) -> None:
        self._w.write_record(NemesisEvent(time.time() if ts is None else ts, node, action, detail))

    def close(self) -> None:
        self._w.close()


def bulk_fill(url: str, queue: str, count: int, body_size: int = 100, threads: int = 4) -> None:
    """Load ``count`` messages through the JSON protocol with plain keep-alive connections (set-up,
    not part of any history: boto3 manages ~500 calls/s per thread, too slow for a big state)."""
    host, port = url.removeprefix("http://").split(":")
    body_of = {"QueueUrl": queue_url(url, queue)}
    pad = "x" * max(body_size - 9, 0)
    errors: list[str] = []

    def work(first: int, n: int) -> None:
        conn = http.client.HTTPConnection(host, int(port), timeout=30)
        headers = {"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "AmazonSQS.SendMessageBatch"}
        try:
            for start in range(first, first + n, 10):
                entries = [{"Id": str(i), "MessageBody": f"{i:09d}{pad}"} for i in range(start, min(start + 10, first + n))]
                for _ in range(50):   # set-up: retry a throttled or 503 batch
                    conn.request("POST", "/", json.dumps({**body_of, "Entries": entries}), headers)
                    r = conn.getresponse()
                    data = r.read()
                    # AWS leaves "Failed" out when no entry failed
                    if r.status == 200 and not json.loads(data).get("Failed"):
                        break
                    time.sleep(0.1)
                else:
                    errors.append(data[:300].decode(errors="replace"))
                    return
        finally:
            conn.close()

    per = -(-count // threads)
    ts = [threading.Thread(target=work, args=(i * per, max(0, min(per, count - i * per)))) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"bulk fill of {queue} failed: {errors[0]}")
