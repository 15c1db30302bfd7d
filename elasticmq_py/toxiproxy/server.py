"""Running the Toxiproxy-API server: on the caller's event loop (:class:`ToxiproxyServer`) or
on a background thread of its own (:class:`ThreadedToxiproxy`, for tests and scripts)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from elasticmq_py.toxiproxy.api import ApiServer, ToxiproxyApp
from elasticmq_py.toxiproxy.proxy import DEFAULT_BUFFER_SIZE


class ToxiproxyServer:
    """The HTTP API plus every proxy it creates, on the running event loop.

        server = ToxiproxyServer(port=0)
        await server.start()          # server.port is the bound API port
        ...
        await server.stop()           # closes the API and every proxy
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 8474, *, config: str | None = None,
                 seed: int | None = None, buffer_size: int = DEFAULT_BUFFER_SIZE) -> None:
        self.app = ToxiproxyApp(seed=seed, buffer_size=buffer_size)
        self.api = ApiServer(self.app, host, port)
        self.config = config

    @property
    def host(self) -> str:
        return self.api.host

    @property
    def port(self) -> int:
        return self.api.port

    async def start(self) -> None:
        if self.config:
            await self.app.populate_from_file(self.config)
        await self.api.start()

    async def stop(self) -> None:
        await self.api.stop()


class ThreadedToxiproxy:
    """A :class:`ToxiproxyServer` on a daemon thread with its own loop; a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, **kw: Any) -> None:
        self.server = ToxiproxyServer(host, port, **kw)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="toxiproxy", daemon=True)

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port

    def start(self) -> "ThreadedToxiproxy":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(10)
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()

    def __enter__(self) -> "ThreadedToxiproxy":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
