"""Long polling in-process: thousands of parked receives cost no CPU, and a send wakes one."""

import asyncio
import json
import time

from storage.commands import CreateQueue, Namespace, SendMessage

from cluster.clock import SystemClock
from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse

N = 3000


def receive_request(wait: int) -> HttpRequest:
    body = json.dumps({"QueueUrl": "lp", "WaitTimeSeconds": wait}).encode()
    return HttpRequest("POST", "/", b"", {"x-amz-target": "AmazonSQS.ReceiveMessage"}, body)


def test_thousands_of_waiters_are_cheap_and_woken_one_per_message():
    async def main():
        backend = LocalBackend(SystemClock())
        await backend.start()
        endpoint = Endpoint(backend)
        key = Namespace().key("lp")
        backend.execute_now(CreateQueue(Namespace(), "lp"))
        tasks = []
        for _ in range(N):
            out = endpoint.handle(receive_request(20))
            assert not isinstance(out, HttpResponse)
            tasks.append(asyncio.ensure_future(out))
        await asyncio.sleep(0.05)
        assert backend.waiters.count() == N

        cpu0 = time.process_time()
        await asyncio.sleep(0.5)
        idle_cpu = time.process_time() - cpu0
        assert idle_cpu < 0.1, f"{N} parked receives used {idle_cpu:.3f}s of CPU in 0.5s"

        backend.execute_now(SendMessage(key, "one"))
        backend.execute_now(SendMessage(key, "two"))
        done, _ = await asyncio.wait(tasks, timeout=2, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.sleep(0.05)
        finished = [t for t in tasks if t.done()]
        bodies = [json.loads(t.result().body) for t in finished]
        got = [m["Body"] for b in bodies for m in b.get("Messages", [])]
        assert sorted(got) == ["one", "two"]
        # only the receives that were woken ran again; the others are still parked
        assert len(finished) <= 2 and backend.waiters.count() >= N - 2

        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert backend.waiters.count() == 0
        await backend.stop()

    asyncio.run(main())


def test_cancelled_waiter_passes_its_wakeup_on():
    async def main():
        backend = LocalBackend(SystemClock())
        await backend.start()
        endpoint = Endpoint(backend)
        backend.execute_now(CreateQueue(Namespace(), "lp"))
        first = asyncio.ensure_future(endpoint.handle(receive_request(20)))
        second = asyncio.ensure_future(endpoint.handle(receive_request(20)))
        await asyncio.sleep(0.05)
        backend.execute_now(SendMessage(Namespace().key("lp"), "m"))
        first.cancel()  # the client of the woken waiter went away before it ran
        res = await asyncio.wait_for(second, 2)
        assert json.loads(res.body)["Messages"][0]["Body"] == "m"
        await backend.stop()

    asyncio.run(main())
