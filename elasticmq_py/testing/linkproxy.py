"""A small TCP proxy for one directed link, run on a background asyncio loop. `cut()` drops live
connections and refuses new ones (like Toxiproxy's enabled=false, but the port stays reserved);
`heal()` lets connections through again; after `record()` it keeps every byte it carries, both
directions, in `recorded` (what an eavesdropper on the link would see). The chaos tests put the Toxiproxy-API server on their
links instead; the process tests need only cut and heal, and this costs them no server."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class ProxyLoop:
    """One event loop thread shared by every proxy of a test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="test-proxies", daemon=True)
        self._thread.start()

    def call(self, coro: Any, timeout: float = 5.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)


class LinkProxy:
    def __init__(self, loop: ProxyLoop, name: str, target_host: str, target_port: int) -> None:
        self.loop = loop
        self.name = name
        self.target = (target_host, target_port)
        self.enabled = True
        self.recorded: bytearray | None = None
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = loop.call(self._start())

    async def _start(self) -> int:
        self._server = await asyncio.start_server(self._on_client, "127.0.0.1", 0)
        return self._server.sockets[0].getsockname()[1]

    async def _on_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self.enabled:
            writer.transport.abort()
            return
        try:
            ur, uw = await asyncio.wait_for(asyncio.open_connection(*self.target), 2)
        except (OSError, asyncio.TimeoutError):
            writer.transport.abort()
            return
        if not self.enabled:
            writer.transport.abort()
            uw.transport.abort()
            return
        self._writers |= {writer, uw}

        async def pump(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            try:
                while True:
                    data = await r.read(65536)
                    if not data:
                        break
                    if self.recorded is not None:
                        self.recorded += data
                    w.write(data)
                    await w.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                w.transport.abort()

        await asyncio.gather(pump(reader, uw), pump(ur, writer))
        self._writers -= {writer, uw}

    async def _cut(self) -> None:
        self.enabled = False
        for w in list(self._writers):
            w.transport.abort()
        self._writers.clear()

    async def _heal(self) -> None:
        self.enabled = True

    def record(self) -> None:
        self.recorded = bytearray()

    def cut(self) -> None:
        self.loop.call(self._cut())

    def heal(self) -> None:
        self.loop.call(self._heal())

    def close(self) -> None:
        async def _close() -> None:
            await self._cut()
            if self._server is not None:
                self._server.close()
        self.loop.call(_close())
