"""Each SQS request is answered once and counted once in the metrics, under the action it named
as soon as that action is known ("unknown" before: a client's string never becomes a label),
whichever branch of the endpoint answers it."""

import json

from storage.commands import CreateQueue, Namespace
from storage.errors import INTERNAL_ERROR

from cluster.clock import SystemClock
from cluster.node_actions import Refuse
from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.reply import Reply

URL = "http://localhost:9324/000000000000/q"


def json_request(target: str, body: bytes, method: str = "POST") -> HttpRequest:
    return HttpRequest(method, "/", b"", {"x-amz-target": target, "host": "localhost:9324"}, body)


def answer(endpoint: Endpoint, req: HttpRequest):
    got = []
    endpoint.handle(req, Reply(got.append))
    assert len(got) == 1
    return got[0]


def endpoint_with_queue(backend=None) -> Endpoint:
    backend = backend or LocalBackend(SystemClock())
    backend.execute_now(CreateQueue(Namespace(), "q"))
    return Endpoint(backend)


def send(body: bytes = b"", method: str = "POST", target: str = "AmazonSQS.SendMessage") -> HttpRequest:
    return json_request(target, body or json.dumps({"QueueUrl": URL, "MessageBody": "hi"}).encode(), method)


def test_json_outcomes_are_counted_under_the_action_once_known():
    ep = endpoint_with_queue()
    ok = answer(ep, send())
    assert ok.status == 200 and "MessageId" in json.loads(ok.body)
    missing = answer(ep, send(json.dumps({"QueueUrl": URL + "-nope", "MessageBody": "hi"}).encode()))
    assert missing.status == 400
    bad_json = answer(ep, send(b"{not json"))
    assert bad_json.status == 400
    unknown = answer(ep, send(target="AmazonSQS.Frobnicate"))
    assert unknown.status == 400
    wrong_method = answer(ep, send(method="PUT"))
    assert wrong_method.status == 405
    assert ep.metrics.request_counts() == {
        ("SendMessage", "ok"): 1,
        ("SendMessage", "client_error"): 2,
        ("unknown", "client_error"): 2,
    }


def test_a_query_request_is_counted_under_its_action():
    ep = endpoint_with_queue()
    body = f"Action=SendMessage&QueueUrl={URL}&MessageBody=hi".encode()
    resp = answer(ep, HttpRequest("POST", "/", b"", {"host": "localhost:9324",
                                                     "content-type": "application/x-www-form-urlencoded"}, body))
    assert resp.status == 200 and b"<MessageId>" in resp.body
    assert ep.metrics.request_counts() == {("SendMessage", "ok"): 1}


class RefusingBackend(LocalBackend):
    def route(self):
        return Refuse("No master yet.")


class BrokenBackend(LocalBackend):
    def execute(self, command, done) -> None:
        raise RuntimeError("a bug")


def test_refused_and_failed_requests_are_server_errors_of_their_action():
    refused = endpoint_with_queue(RefusingBackend(SystemClock()))
    resp = answer(refused, send())
    assert resp.status == 503 and "No master yet." in json.loads(resp.body)["message"]
    assert refused.metrics.request_counts() == {("SendMessage", "server_error"): 1}
    broken = endpoint_with_queue(BrokenBackend(SystemClock()))
    resp = answer(broken, send())
    assert resp.status == INTERNAL_ERROR.status
    assert broken.metrics.request_counts() == {("SendMessage", "server_error"): 1}
