"""Long polling in-process: thousands of parked receives cost no CPU, and a send wakes one."""

import asyncio
import json
import time

from storage.commands import CreateQueue, Namespace, SendMessage

from cluster.clock import SystemClock
from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.reply import Reply

N = 3000


def receive_request(wait: int) -> HttpRequest:
    body = json.dumps({"QueueUrl": "lp", "WaitTimeSeconds": wait}).encode()
    return HttpRequest("POST", "/", b"", {"x-amz-target": "AmazonSQS.ReceiveMessage"}, body)


def park(endpoint: Endpoint) -> tuple[Reply, list]:
    got: list = []
    reply = Reply(got.append)
    endpoint.handle(receive_request(20), reply)
    return reply, got


def test_thousands_of_waiters_are_cheap_and_woken_one_per_message():
    async def main():
        backend = LocalBackend(SystemClock())
        await backend.start()
        endpoint = Endpoint(backend)
        key = Namespace().key("lp")
        backend.execute_now(CreateQueue(Namespace(), "lp"))
        waiting = [park(endpoint) for _ in range(N)]
        assert not any(got for _, got in waiting), "nothing to receive yet: they wait"
        await asyncio.sleep(0.05)
        assert backend.waiters.count() == N

        cpu0 = time.process_time()
        await asyncio.sleep(0.5)
        idle_cpu = time.process_time() - cpu0
        assert idle_cpu < 0.1, f"{N} parked receives used {idle_cpu:.3f}s of CPU in 0.5s"

        backend.execute_now(SendMessage(key, "one"))
        backend.execute_now(SendMessage(key, "two"))
        for _ in range(200):
            if sum(1 for _, got in waiting if got) >= 2:
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        finished = [got[0] for _, got in waiting if got]
        bodies = [json.loads(r.body) for r in finished]
        received = [m["Body"] for b in bodies for m in b.get("Messages", [])]
        assert sorted(received) == ["one", "two"]
        # only the receives that were woken ran again; the others are still parked
        assert len(finished) <= 2 and backend.waiters.count() >= N - 2

        for reply, _ in waiting:
            reply.cancel()
        await asyncio.sleep(0.05)
        assert backend.waiters.count() == 0
        await backend.stop()

    asyncio.run(main())


def test_cancelled_waiter_passes_its_wakeup_on():
    async def main():
        backend = LocalBackend(SystemClock())
        await backend.start()
        endpoint = Endpoint(backend)
        backend.execute_now(CreateQueue(Namespace(), "lp"))
        first, _ = park(endpoint)
        _, second = park(endpoint)
        await asyncio.sleep(0.05)
        backend.execute_now(SendMessage(Namespace().key("lp"), "m"))
        first.cancel()  # the client of the woken waiter went away before it ran
        for _ in range(200):
            if second:
                break
            await asyncio.sleep(0.01)
        assert json.loads(second[0].body)["Messages"][0]["Body"] == "m"
        await backend.stop()

    asyncio.run(main())
