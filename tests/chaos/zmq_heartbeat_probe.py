"""Does libzmq's ZMTP heartbeat close a DEALER->ROUTER connection whose data is queued behind a
bandwidth-capped link? (docs/testing.md, "Chaos tests": state transfers over slow links.)

    python -m tests.chaos.zmq_heartbeat_probe HEARTBEAT_TIMEOUT_MS RATE_KB

Sends 8 x 2 MB messages (a snapshot window of 2,000 x 1 KB records) from a DEALER configured as
cluster/replication/transport.py configures its DEALERs (heartbeat every 400 ms) through a
Toxiproxy `bandwidth` toxic, and counts the disconnections the socket monitor reports.
"""

from __future__ import annotations

import sys
import threading
import time

import zmq
from toxiproxy import Toxiproxy
from zmq.utils.monitor import recv_monitor_message

from elasticmq_py.toxiproxy.testing import start_toxiproxy


def probe(timeout_ms: int, rate_kb: int, messages: int = 8, size: int = 2_000_000) -> str:
    tp = start_toxiproxy()
    ctx = zmq.Context()
    try:
        client = Toxiproxy()
        client.update_api_consumer(tp.host, tp.port)
        router = ctx.socket(zmq.ROUTER)
        port = router.bind_to_random_port("tcp://127.0.0.1")
        px = client.create(upstream=f"127.0.0.1:{port}", name=f"hb{port}", listen="127.0.0.1:0")
        px.add_toxic(type="bandwidth", stream="upstream", attributes={"rate": rate_kb})
        dealer = ctx.socket(zmq.DEALER)
        for opt, v in ((zmq.LINGER, 0), (zmq.IMMEDIATE, 1), (zmq.HEARTBEAT_IVL, 400),
                       (zmq.HEARTBEAT_TIMEOUT, timeout_ms), (zmq.RECONNECT_IVL, 100)):
            dealer.setsockopt(opt, v)
        mon = dealer.get_monitor_socket()
        dealer.connect(f"tcp://127.0.0.1:{px.listen.rsplit(':', 1)[1]}")
        events: list[tuple[float, int]] = []
        t0 = time.time()

        def watch() -> None:
            while True:
                try:
                    events.append((round(time.time() - t0, 2), recv_monitor_message(mon)["event"]))
                except zmq.ZMQError:
                    return

        threading.Thread(target=watch, daemon=True).start()
        time.sleep(0.5)
        for i in range(messages):
            dealer.send(bytes([i]) * size, zmq.NOBLOCK)
        got = 0
        router.RCVTIMEO = 1000
        while time.time() - t0 < 60 and got < messages:
            try:
                router.recv_multipart()
                got += 1
            except zmq.Again:
                pass
        drops = [t for t, e in events if e == zmq.EVENT_DISCONNECTED]
        if "-v" in sys.argv:
            print([(t, zmq.Event(e).name) for t, e in events])
        dealer.disable_monitor()   # before the sockets close: libzmq aborts on a live monitor
        return (f"heartbeat timeout {timeout_ms} ms, {rate_kb} KB/s: {got}/{messages} messages in "
                f"{time.time() - t0:.1f}s; disconnections at {drops}")
    finally:
        tp.stop()


if __name__ == "__main__":
    print(probe(int(sys.argv[1]), int(sys.argv[2])))
