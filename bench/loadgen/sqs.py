"""SQS requests as raw bytes and the checks on their responses, for both wire protocols.

A *driver* is a generator, one per connection: it yields the bytes of the next request and is
sent back ``(status, body)`` of its response. It validates every response (status, ids, MD5s)
and records successes and errors on a ``Stats``; returning ends the connection (a drained queue).
Drivers know nothing about sockets, so the asyncio runner and the blocking latency loop share
them.
"""

from __future__ import annotations

import hashlib
import html
import json
import random
import re
import string
from array import array
from collections import Counter
from urllib.parse import urlencode

JSON, QUERY = "json", "query"
JSON_CT = "application/x-amz-json-1.0"
FORM_CT = "application/x-www-form-urlencoded; charset=utf-8"
# A SigV4-shaped header: moto routes on the credential scope's service name, and real clients
# always send one, so every target parses it.
AUTH = ("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240101/us-east-1/sqs/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-date, Signature=" + "0" * 64)
AMZ_DATE = "20240101T000000Z"
VISIBILITY_S = 300  # received messages stay invisible for the whole run


class Stats:
    """What one worker process saw. Errors are counted by kind, never dropped."""

    __slots__ = ("requests", "messages", "errors", "latencies", "empty_receives", "reconnects",
                 "received")

    def __init__(self) -> None:
        self.requests = 0
        self.messages = 0          # messages sent (send scenarios) or deleted (receive cycles)
        self.received = 0          # messages received (receive cycles)
        self.errors: Counter[str] = Counter()
        self.latencies = array("d")
        self.empty_receives = 0
        self.reconnects = 0

    def error(self, kind: str) -> None:
        self.errors[kind] += 1

    def to_dict(self) -> dict:
        return {"requests": self.requests, "messages": self.messages, "received": self.received,
                "errors": dict(self.errors), "latencies": self.latencies.tobytes(),
                "empty_receives": self.empty_receives, "reconnects": self.reconnects}


# -- payloads ---------------------------------------------------------------------------------

class Payloads:
    """A pool of distinct message bodies of one size, with their MD5s precomputed, so that a
    response's MD5 is checked against the body that request carried."""

    def __init__(self, size: int, count: int = 64, seed: int = 1):
        rnd = random.Random(seed * 1_000_003 + size)
        alphabet = string.ascii_letters + string.digits
        self.bodies: list[str] = []
        for i in range(count):
            head = f"{size}-{i:04d}-"
            self.bodies.append(head + "".join(rnd.choices(alphabet, k=max(0, size - len(head))))[: size - len(head)])
        self.md5s = [hashlib.md5(b.encode()).hexdigest() for b in self.bodies]
        self.known = dict(zip(self.md5s, self.bodies))


# -- request encoding -----------------------------------------------------------------------

# (access key id, secret, region): sign requests for real, for a server that verifies SigV4
Credentials = tuple[str, str, str]


def sign(credentials: Credentials, host_header: str, path: str, content_type: str, body: bytes,
         extra: tuple[tuple[str, str], ...] = ()) -> tuple[str, str]:
    """(Authorization, X-Amz-Date) of a POST as botocore signs it. A SigV4 request stays valid
    for 15 minutes and carries no nonce, so a driver signs each of its prepared requests once,
    when its job starts, and sends them again and again: the server verifies every one in full."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials as BotoCredentials

    key, secret, region = credentials
    req = AWSRequest("POST", f"http://{host_header}{path}", data=body,
                     headers={"Content-Type": content_type, **dict(extra)})
    SigV4Auth(BotoCredentials(key, secret), "sqs", region).add_auth(req)
    return req.headers["Authorization"], req.headers["X-Amz-Date"]


def http_post(host_header: str, path: str, content_type: str, body: bytes,
              extra: tuple[tuple[str, str], ...] = (), credentials: Credentials | None = None) -> bytes:
    auth, date = (AUTH, AMZ_DATE) if credentials is None else sign(credentials, host_header, path, content_type,
                                                                   body, extra)
    head = [f"POST {path} HTTP/1.1", f"Host: {host_header}", "User-Agent: elasticmq-py-bench/1",
            "Accept-Encoding: identity", f"Content-Type: {content_type}", f"X-Amz-Date: {date}",
            f"Authorization: {auth}"]
    head += [f"{k}: {v}" for k, v in extra]
    head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class Api:
    """Builds the requests of one protocol against one queue."""

    def __init__(self, protocol: str, host_header: str, queue_url: str, credentials: Credentials | None = None):
        if protocol not in (JSON, QUERY):
            raise ValueError(protocol)
        self.protocol = protocol
        self.host_header = host_header
        self.queue_url = queue_url
        self.credentials = credentials

    def _call(self, action: str, params: dict) -> bytes:
        if self.protocol == JSON:
            body = json.dumps(params, separators=(",", ":")).encode()
            return http_post(self.host_header, "/", JSON_CT, body,
                             (("X-Amz-Target", f"AmazonSQS.{action}"),), self.credentials)
        form = {"Action": action, "Version": "2012-11-05"}
        form.update(params)
        return http_post(self.host_header, "/", FORM_CT, urlencode(form).encode(), credentials=self.credentials)

    def send(self, body: str) -> bytes:
        return self._call("SendMessage", {"QueueUrl": self.queue_url, "MessageBody": body})

    def _batch(self, action: str, field: str, entries: list[tuple[str, str]]) -> bytes:
        """A batch request: a JSON list of entries, or Query's numbered Entry.N.* parameters."""
        if self.protocol == JSON:
            return self._call(action, {"QueueUrl": self.queue_url, "Entries": [
                {"Id": i, field: v} for i, v in entries]})
        params = {"QueueUrl": self.queue_url}
        for n, (i, v) in enumerate(entries, 1):
            params[f"{action}RequestEntry.{n}.Id"] = i
            params[f"{action}RequestEntry.{n}.{field}"] = v
        return self._call(action, params)

    def send_batch(self, entries: list[tuple[str, str]]) -> bytes:
        return self._batch("SendMessageBatch", "MessageBody", entries)

    def receive(self, max_messages: int = 10) -> bytes:
        p = {"QueueUrl": self.queue_url, "MaxNumberOfMessages": max_messages,
             "VisibilityTimeout": VISIBILITY_S, "WaitTimeSeconds": 0}
        if self.protocol == QUERY:
            p = {k: str(v) for k, v in p.items()}
        return self._call("ReceiveMessage", p)

    def delete(self, handle: str) -> bytes:
        return self._call("DeleteMessage", {"QueueUrl": self.queue_url, "ReceiptHandle": handle})

    def delete_batch(self, entries: list[tuple[str, str]]) -> bytes:
        return self._batch("DeleteMessageBatch", "ReceiptHandle", entries)

    # -- response parsing (raises ValueError/KeyError/TypeError on a malformed document) ----

    def parse_send(self, body: bytes) -> tuple[str, str]:
        if self.protocol == JSON:
            o = json.loads(body)
            return o["MessageId"], o["MD5OfMessageBody"]
        return _tag(body, "MessageId"), _tag(body, "MD5OfMessageBody")

    def parse_send_batch(self, body: bytes) -> tuple[list[tuple[str, str, str]], list[str]]:
        if self.protocol == JSON:
            o = json.loads(body)
            ok = [(e["Id"], e["MessageId"], e["MD5OfMessageBody"]) for e in o.get("Successful") or ()]
            return ok, [e.get("Code", "?") for e in o.get("Failed") or ()]
        ok = [(_tag(b, "Id"), _tag(b, "MessageId"), _tag(b, "MD5OfMessageBody"))
              for b in _blocks(body, "SendMessageBatchResultEntry")]
        return ok, [_tag(b, "Code") for b in _blocks(body, "BatchResultErrorEntry")]

    def parse_receive(self, body: bytes) -> list[tuple[str, str, str, str]]:
        """[(message id, receipt handle, MD5OfBody, body)]"""
        if self.protocol == JSON:
            o = json.loads(body)
            return [(m["MessageId"], m["ReceiptHandle"], m["MD5OfBody"], m["Body"])
                    for m in o.get("Messages") or ()]
        return [(_tag(b, "MessageId"), _tag(b, "ReceiptHandle"), _tag(b, "MD5OfBody"), _tag(b, "Body"))
                for b in _blocks(body, "Message")]

    def parse_delete_batch(self, body: bytes) -> tuple[list[str], list[str]]:
        if self.protocol == JSON:
            o = json.loads(body)
            return [e["Id"] for e in o.get("Successful") or ()], \
                [e.get("Code", "?") for e in o.get("Failed") or ()]
        return [_tag(b, "Id") for b in _blocks(body, "DeleteMessageBatchResultEntry")], \
            [_tag(b, "Code") for b in _blocks(body, "BatchResultErrorEntry")]

    def error_kind(self, status: int, body: bytes) -> str:
        """``http_400:InvalidParameterValue``: the status and the SQS error code, if any."""
        code = "?"
        try:
            if body[:1] == b"{":
                code = str(json.loads(body).get("__type", "?")).rpartition("#")[2]
            else:
                m = _CODE.search(body)
                if m:
                    code = m.group(1).decode("utf-8", "replace").strip()
        except Exception:
            pass
        return f"http_{status}:{code[:80]}"


_CODE = re.compile(rb"<Code>([^<]*)</Code>")
_TAGS: dict[str, re.Pattern] = {}
_BLOCKS: dict[str, re.Pattern] = {}


def _tag(doc: bytes, name: str) -> str:
    pat = _TAGS.get(name)
    if pat is None:
        pat = _TAGS[name] = re.compile(rb"<%s>([^<]*)</%s>" % (name.encode(), name.encode()))
    m = pat.search(doc)
    if m is None:
        raise ValueError(f"no <{name}>")
    v = m.group(1).decode("utf-8").strip()
    return html.unescape(v) if "&" in v else v


def _blocks(doc: bytes, name: str) -> list[bytes]:
    pat = _BLOCKS.get(name)
    if pat is None:
        pat = _BLOCKS[name] = re.compile(rb"<%s>(.*?)</%s>" % (name.encode(), name.encode()), re.S)
    return pat.findall(doc)


# -- drivers ----------------------------------------------------------------------------------

class Plan:
    """Everything a worker needs to drive one kind of load; built once per job per worker."""

    def __init__(self, kind: str, protocol: str, host_header: str, queue_url: str,
                 body_size: int = 100, batch: int = 10, trivial_body: bytes = b"",
                 credentials: Credentials | None = None):
        self.kind = kind
        self.api = Api(protocol, host_header, queue_url, credentials)
        self.payloads = Payloads(body_size)
        self.batch = batch
        self.trivial_body = trivial_body
        self.receive: bytes | None = None
        n = len(self.payloads.bodies)
        if kind in ("send", "trivial"):
            self.requests = [self.api.send(b) for b in self.payloads.bodies]
        elif kind == "send_batch":
            self.requests = []
            for j in range(n):
                entries = [(str(k), self.payloads.bodies[(j * batch + k) % n]) for k in range(batch)]
                self.requests.append(self.api.send_batch(entries))
        elif kind in ("receive_delete", "receive_delete_single"):
            self.receive = self.api.receive(10)
        else:
            raise ValueError(kind)

    def cycle_start(self, req: bytes) -> bool:
        """Whether ``req`` begins a new cycle (a run stops only there, so that received
        messages are still deleted and counted)."""
        return self.receive is None or req is self.receive

    def driver(self, conn_index: int, stats: Stats):
        return getattr(self, "_" + self.kind)(conn_index, stats)

    def _trivial(self, i: int, stats: Stats):
        reqs, expect, n = self.requests, self.trivial_body, len(self.requests)
        while True:
            i += 1
            status, body = yield reqs[i % n]
            if status != 200:
                stats.error(f"http_{status}")
            elif body != expect:
                stats.error("unexpected_body")
            else:
                stats.messages += 1

    def _send(self, i: int, stats: Stats):
        reqs, md5s, n, api = self.requests, self.payloads.md5s, len(self.requests), self.api
        i *= 7
        while True:
            i += 1
            k = i % n
            status, body = yield reqs[k]
            if status != 200:
                stats.error(api.error_kind(status, body))
                continue
            try:
                mid, md5 = api.parse_send(body)
            except Exception:
                stats.error("unparseable_send_response")
                continue
            if not mid:
                stats.error("missing_message_id")
            elif md5 != md5s[k]:
                stats.error("md5_mismatch")
            else:
                stats.messages += 1

    def _send_batch(self, i: int, stats: Stats):
        reqs, md5s, n, api, batch = self.requests, self.payloads.md5s, len(self.requests), self.api, self.batch
        i *= 7
        while True:
            i += 1
            k = i % n
            status, body = yield reqs[k]
            if status != 200:
                stats.error(api.error_kind(status, body))
                continue
            try:
                ok, failed = api.parse_send_batch(body)
            except Exception:
                stats.error("unparseable_batch_response")
                continue
            for code in failed:
                stats.error(f"batch_entry_failed:{code}")
            seen = set()
            for eid, mid, md5 in ok:
                try:
                    expect = md5s[(k * batch + int(eid)) % n]
                except ValueError:
                    stats.error("unknown_batch_entry_id")
                    continue
                if eid in seen:
                    stats.error("duplicate_batch_entry")
                elif not mid:
                    stats.error("missing_message_id")
                elif md5 != expect:
                    stats.error("md5_mismatch")
                else:
                    seen.add(eid)
                    stats.messages += 1
            if len(ok) + len(failed) != batch:
                stats.error("batch_entry_count")

    def _check_received(self, msgs, stats: Stats) -> list[tuple[str, str]]:
        """The (id, receipt handle) of every received message that checks out."""
        known = self.payloads.known
        good = []
        for n, (mid, handle, md5, body) in enumerate(msgs):
            stats.received += 1
            if not mid or not handle:
                stats.error("missing_id_or_receipt")
            elif hashlib.md5(body.encode()).hexdigest() != md5:
                stats.error("receive_md5_mismatch")
            elif known.get(md5) != body:
                stats.error("unknown_body")
            else:
                good.append((str(n), handle))
                continue
            if handle:  # still delete it, so it does not come back
                good.append((f"bad{n}", handle))
        return good

    def _received(self, stats: Stats):
        """Receive until an answer parses: its messages, or None once the queue is drained
        (nothing comes back within the run: the visibility timeout is long)."""
        api = self.api
        while True:
            status, body = yield self.receive
            if status != 200:
                stats.error(api.error_kind(status, body))
                continue
            try:
                msgs = api.parse_receive(body)
            except Exception:
                stats.error("unparseable_receive_response")
                continue
            if not msgs:
                stats.empty_receives += 1
                return None
            return msgs

    def _receive_delete(self, i: int, stats: Stats):
        api = self.api
        while True:
            msgs = yield from self._received(stats)
            if msgs is None:
                return
            entries = self._check_received(msgs, stats)
            if not entries:
                continue
            status, body = yield api.delete_batch(entries)
            if status != 200:
                stats.error(api.error_kind(status, body))
                continue
            try:
                ok, failed = api.parse_delete_batch(body)
            except Exception:
                stats.error("unparseable_delete_batch_response")
                continue
            for code in failed:
                stats.error(f"delete_entry_failed:{code}")
            asked = {e for e, _ in entries}
            for eid in ok:
                if eid not in asked:
                    stats.error("unknown_delete_entry_id")
                elif not eid.startswith("bad"):
                    stats.messages += 1
            if len(ok) + len(failed) != len(entries):
                stats.error("delete_entry_count")

    def _receive_delete_single(self, i: int, stats: Stats):
        api = self.api
        while True:
            msgs = yield from self._received(stats)
            if msgs is None:
                return
            for eid, handle in self._check_received(msgs, stats):
                status, body = yield api.delete(handle)
                if status != 200:
                    stats.error(api.error_kind(status, body))
                elif not eid.startswith("bad"):
                    stats.messages += 1
