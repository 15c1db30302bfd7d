"""Hypothesis over the HTTP surface: malformed requests never produce a 5xx, never raise, and
never change what is stored. In-process (Endpoint and the HTTP protocol with a fake transport)
so that thousands of cases run in seconds."""

import json
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import ManualClock
from storage.commands import CreateQueue, Namespace, SendMessage

from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.httpserver import HttpProtocol
from elasticmq_py.protocol.model import sqs_model
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse
from elasticmq_py.reply import Reply

from tests.endpoint.samples import SAMPLES

ACTIONS = sorted(sqs_model().operations)
URL = "http://localhost:9324/000000000000/q1"
SETTINGS = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def world():
    backend = LocalBackend(ManualClock())
    backend.execute_now(CreateQueue(Namespace(), "q1"))
    backend.execute_now(CreateQueue(Namespace(), "q2.fifo", {"FifoQueue": "true"}))
    backend.execute_now(SendMessage(Namespace().key("q1"), "keep me"))
    yield Endpoint(backend), backend


class _NoWaiting(Reply):
    """A long poll would continue as a Task: close it unstarted and count it answered."""

    __slots__ = ()

    def follow(self, work, on_error) -> None:
        work.close()
        self.set(HttpResponse(200, (), b""))


def respond(endpoint, req) -> HttpResponse:
    got: list[HttpResponse] = []
    endpoint.handle(req, _NoWaiting(got.append))
    assert len(got) == 1, "every request is answered inside handle() on a single node"
    return got[0]


json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                         st.text(max_size=20), st.just(URL), st.just("q1"))
json_values = st.recursive(json_scalars, lambda c: st.one_of(st.lists(c, max_size=4),
                                                               st.dictionaries(st.text(max_size=8), c, max_size=4)),
                           max_leaves=12)


@st.composite
def mutated_sample(draw):
    """A valid request for some action with one member replaced by anything."""
    action = draw(st.sampled_from(ACTIONS))
    params = {k: v for k, v in SAMPLES[action].items()}
    params = json.loads(json.dumps(params, default=lambda b: "AAE="))
    if params:
        key = draw(st.sampled_from(sorted(params)))
        if draw(st.booleans()):
            params[key] = draw(json_values)
        else:
            del params[key]
    return action, params


def _digest_unchanged_on_error(backend, resp, before):
    assert resp.status < 500 or resp.status == 503, resp
    if resp.status >= 400:
        assert backend.storage.digest() == before


@SETTINGS
@given(case=mutated_sample(), target_noise=st.sampled_from(["", "", "x", "AmazonSQS.", "amazonsqs."]))
def test_json_fuzz(world, case, target_noise):
    endpoint, backend = world
    action, params = case
    target = f"AmazonSQS.{action}" if not target_noise else target_noise + action
    before = backend.storage.digest()
    req = HttpRequest("POST", "/", b"", {"x-amz-target": target, "host": "localhost:9324",
                                         "content-type": "application/x-amz-json-1.0"},
                      json.dumps(params).encode())
    resp = respond(endpoint, req)
    _digest_unchanged_on_error(backend, resp, before)
    if resp.status >= 400:
        doc = json.loads(resp.body)
        assert doc["__type"].startswith("com.amazonaws.sqs#") and "message" in doc
        assert any(k == "X-Amzn-Query-Error" for k, _ in resp.headers)


@SETTINGS
@given(body=st.binary(max_size=300), target=st.sampled_from(ACTIONS))
def test_json_random_bytes(world, body, target):
    endpoint, backend = world
    before = backend.storage.digest()
    resp = respond(endpoint, HttpRequest("POST", "/", b"", {"x-amz-target": f"AmazonSQS.{target}"}, body))
    _digest_unchanged_on_error(backend, resp, before)


form_keys = st.one_of(
    st.sampled_from(["Action", "QueueUrl", "QueueName", "MessageBody", "DelaySeconds", "Attribute.1.Name",
                     "Attribute.1.Value", "MessageAttribute.1.Name", "MessageAttribute.1.Value.DataType",
                     "MessageAttribute.1.Value.StringValue", "MessageAttribute.1.Value.BinaryValue",
                     "SendMessageBatchRequestEntry.1.Id", "SendMessageBatchRequestEntry.1.MessageBody",
                     "AttributeName.1", "Tag.1.Key", "TagKey.1", "MaxNumberOfMessages", "WaitTimeSeconds",
                     "ReceiptHandle", "Label", "AWSAccountId.1", "ActionName.1"]),
    st.text(max_size=12))
form_values = st.one_of(st.sampled_from(ACTIONS), st.just(URL), st.just("q1"), st.text(max_size=20),
                        st.integers(-5, 100).map(str), st.binary(max_size=10).map(lambda b: b.decode("latin-1")))


@SETTINGS
@given(pairs=st.lists(st.tuples(form_keys, form_values), max_size=8), action=st.sampled_from(ACTIONS),
       garbage=st.binary(max_size=20), method=st.sampled_from(["POST", "POST", "GET", "PUT"]))
def test_query_fuzz(world, pairs, action, garbage, method):
    endpoint, backend = world
    body = "&".join(f"{quote(k)}={quote(v, errors='surrogateescape')}" for k, v in [("Action", action), *pairs])
    before = backend.storage.digest()
    raw = body.encode() + (b"&" + garbage if garbage else b"")
    req = HttpRequest(method, "/", raw if method == "GET" else b"",
                      {"content-type": "application/x-www-form-urlencoded"}, raw)
    resp = respond(endpoint, req)
    _digest_unchanged_on_error(backend, resp, before)
    if resp.status >= 400:
        assert resp.body.startswith(b'<?xml version="1.0"?><ErrorResponse')


class FakeTransport:
    def __init__(self):
        self.out = bytearray()
        self.closed = False

    def write(self, data):
        assert not self.closed
        self.out += data

    def close(self):
        self.closed = True

    def pause_reading(self):
        pass

    def resume_reading(self):
        pass


request_lines = st.sampled_from([b"POST / HTTP/1.1\r\n", b"GET /health HTTP/1.1\r\n", b"GET /metrics HTTP/1.0\r\n",
                                 b"POST /000000000000/q1 HTTP/1.1\r\n", b"PUT / HTTP/1.1\r\n", b""])
headers = st.lists(st.sampled_from([
    b"Host: h\r\n", b"Content-Length: 5\r\n", b"Content-Length: -1\r\n", b"Content-Length: 99999999999\r\n",
    b"Transfer-Encoding: chunked\r\n", b"X-Amz-Target: AmazonSQS.ListQueues\r\n", b"Expect: 100-continue\r\n",
    b"Content-Type: application/x-www-form-urlencoded\r\n", b"Connection: close\r\n", b"Upgrade: h2c\r\n",
    b"Connection: upgrade\r\n", b"Bad Header\r\n", b"\x00: \xff\r\n"]), max_size=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(line=request_lines, hs=headers, tail=st.binary(max_size=60), splits=st.lists(st.integers(0, 200), max_size=3))
def test_http_bytes_fuzz(world, line, hs, tail, splits):
    endpoint, backend = world
    before = backend.storage.digest()
    data = line + b"".join(hs) + b"\r\n" + tail
    t = FakeTransport()
    p = HttpProtocol(endpoint, max_body=4096)
    p.connection_made(t)
    cuts = sorted({min(s, len(data)) for s in splits})
    prev = 0
    for c in cuts + [len(data)]:
        p.data_received(data[prev:c])  # must never raise
        prev = c
    p.connection_lost(None)
    out = bytes(t.out)
    for status_line in [l for l in out.split(b"\r\n") if l.startswith(b"HTTP/1.1 ")]:
        code = int(status_line.split()[1])
        assert code < 500 or code == 503, out
    assert b"Traceback" not in out
    assert backend.storage.digest() == before
