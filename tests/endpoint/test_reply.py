"""Answers by callback (elasticmq_py/reply.py): the path of a cluster master's replicated writes.

The backend here answers on a later loop turn, as the master does once replicas acknowledged;
the cluster tests drive the same path with real processes."""

import asyncio
import json

import pytest

from storage.commands import CreateQueue, Namespace, SendMessage
from storage.errors import SERVICE_UNAVAILABLE, SqsError

from cluster.clock import SystemClock
from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.httpserver import serve
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse
from elasticmq_py.reply import Reply


class LaterBackend(LocalBackend):
    """Executes at once, answers on the next loop turn (as a master does once replicas acked)."""

    def __init__(self, fail: SqsError | None = None) -> None:
        super().__init__(SystemClock())
        self.fail = fail
        self.callbacks = 0

    def execute(self, command, done) -> None:
        self.callbacks += 1
        if self.fail is not None:
            done(None, self.fail)
            return
        try:
            result = self.execute_now(command)
        except SqsError as e:
            asyncio.get_running_loop().call_soon(done, None, e)
            return
        asyncio.get_running_loop().call_soon(done, result, None)


def request(action: str, **params) -> HttpRequest:
    return HttpRequest("POST", "/", b"", {"x-amz-target": f"AmazonSQS.{action}", "host": "localhost:9324"},
                       json.dumps(params).encode())


def run(coro):
    return asyncio.run(coro)


def ask(endpoint: Endpoint, req: HttpRequest) -> tuple[Reply, list[HttpResponse]]:
    got: list[HttpResponse] = []
    reply = Reply(got.append)
    endpoint.handle(req, reply)
    return reply, got


def test_reply_hands_over_the_first_answer_once_and_none_after_cancel():
    got = []
    r = Reply(got.append)
    assert not r.done()
    r.set(HttpResponse(200, (), b"a"))
    r.set(HttpResponse(500, (), b"ignored"))
    assert [x.body for x in got] == [b"a"] and r.done()

    cancelled = Reply(got.append)
    cancelled.cancel()
    cancelled.set(HttpResponse(200, (), b"c"))
    assert len(got) == 1 and cancelled.done()


def test_follow_takes_the_task_result_or_the_fallback():
    async def main():
        async def ok():
            await asyncio.sleep(0)
            return HttpResponse(200, (), b"later")

        async def broken():
            raise RuntimeError("bug")

        got = []
        a, b = Reply(got.append), Reply(got.append)
        a.follow(ok(), lambda: HttpResponse(500, (), b"fallback"))
        b.follow(broken(), lambda: HttpResponse(500, (), b"fallback"))
        await asyncio.sleep(0.01)
        assert sorted(r.body for r in got) == [b"fallback", b"later"]

        c = Reply(got.append)
        c.follow(asyncio.sleep(10), lambda: HttpResponse(500, (), b"x"))
        c.cancel()
        await asyncio.sleep(0.01)
        assert len(got) == 2

    run(main())


def test_endpoint_answers_a_callback_backend_through_a_reply():
    async def main():
        backend = LaterBackend()
        endpoint = Endpoint(backend)
        backend.execute_now(CreateQueue(Namespace(), "q"))
        out, got = ask(endpoint, request("SendMessage", QueueUrl="q", MessageBody="hello"))
        assert not out.done() and not got
        await asyncio.sleep(0)
        assert got[0].status == 200 and "MessageId" in json.loads(got[0].body)

        _, missing = ask(endpoint, request("SendMessage", QueueUrl="nope", MessageBody="x"))
        await asyncio.sleep(0)
        assert missing[0].status == 400
        assert json.loads(missing[0].body)["__type"].endswith("QueueDoesNotExist")
        assert backend.callbacks == 2

    run(main())


def test_an_error_given_at_once_is_answered_without_waiting():
    async def main():
        endpoint = Endpoint(LaterBackend(fail=SERVICE_UNAVAILABLE("not the master; retry")))
        reply, got = ask(endpoint, request("SendMessage", QueueUrl="q", MessageBody="x"))
        assert reply.done(), "answered inside handle()"
        out = got[0]
        assert out.status == 503
        assert json.loads(out.body)["__type"] == "com.amazonaws.sqs#ServiceUnavailable"
        assert dict(out.headers)["X-Amzn-Query-Error"] == "ServiceUnavailable;Receiver"

    run(main())


def test_long_poll_after_a_callback_answer_continues_and_can_be_cancelled():
    async def main():
        backend = LaterBackend()
        await backend.start()
        endpoint = Endpoint(backend)
        backend.execute_now(CreateQueue(Namespace(), "lp"))
        woken, got = ask(endpoint, request("ReceiveMessage", QueueUrl="lp", WaitTimeSeconds=5))
        dropped, _ = ask(endpoint, request("ReceiveMessage", QueueUrl="lp", WaitTimeSeconds=20))
        await asyncio.sleep(0.05)
        assert not woken.done() and backend.waiters.count() == 2
        dropped.cancel()                  # its client went away
        await asyncio.sleep(0.01)
        assert backend.waiters.count() == 1
        backend.execute_now(SendMessage(Namespace().key("lp"), "m"))
        for _ in range(100):
            if woken.done():
                break
            await asyncio.sleep(0.01)
        assert json.loads(got[0].body)["Messages"][0]["Body"] == "m"
        await backend.stop()

    run(main())


def _http(action: str, **params) -> bytes:
    body = json.dumps(params).encode()
    return (f"POST / HTTP/1.1\r\nHost: localhost\r\nX-Amz-Target: AmazonSQS.{action}\r\n"
            f"Content-Type: application/x-amz-json-1.0\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


@pytest.mark.parametrize("pipelined", [1, 5])
def test_http_connection_writes_callback_answers_in_order(pipelined):
    async def main():
        backend = LaterBackend()
        await backend.start()
        endpoint = Endpoint(backend)
        backend.execute_now(CreateQueue(Namespace(), "q"))
        server = await serve(endpoint, "127.0.0.1", 0, 1 << 20)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(b"".join(_http("SendMessage", QueueUrl="q", MessageBody=f"m{i}") for i in range(pipelined)))
            writer.write(_http("ReceiveMessage", QueueUrl="q", MaxNumberOfMessages=10))
            await writer.drain()
            bodies = []
            for _ in range(pipelined + 1):
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
                assert head.startswith(b"HTTP/1.1 200")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                bodies.append(json.loads(await reader.readexactly(length)))
            assert all("MessageId" in b for b in bodies[:-1])
            assert sorted(m["Body"] for m in bodies[-1]["Messages"]) == [f"m{i}" for i in range(pipelined)]

            # a client that leaves while its long poll waits: the waiter goes with it
            backend.execute_now(CreateQueue(Namespace(), "empty"))
            writer.write(_http("ReceiveMessage", QueueUrl="empty", WaitTimeSeconds=20))
            await writer.drain()
            await asyncio.sleep(0.05)
            assert backend.waiters.count() == 1
            writer.transport.abort()
            await asyncio.sleep(0.05)
            assert backend.waiters.count() == 0
        finally:
            await server.close()
            await backend.stop()

    run(main())



@pytest.mark.parametrize("backend", [LocalBackend, LaterBackend], ids=["synchronous", "callback"])
def test_a_long_poll_dropped_before_it_starts_leaves_no_unawaited_coroutine(backend):
    """A long poll's Task cancelled before its first step (the client went away at once): its
    inner coroutine must not be left behind never awaited (Python warns at collection)."""
    import gc
    import warnings

    async def main():
        ep = Endpoint(backend(SystemClock()) if backend is LocalBackend else backend())
        _, created = ask(ep, request("CreateQueue", QueueName="q"))
        await asyncio.sleep(0)
        url = json.loads(created[0].body)["QueueUrl"]
        out, _ = ask(ep, request("ReceiveMessage", QueueUrl=url, WaitTimeSeconds=5))
        if backend is LaterBackend:
            # One turn: the backend's callback finds no message and the long poll follows as a
            # Task, whose first step comes after this coroutine's.
            await asyncio.sleep(0)
        assert not out.done() and out._task is not None
        out.cancel()                      # before the Task's first step, as httpserver does on close
        await asyncio.sleep(0)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(main())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]
