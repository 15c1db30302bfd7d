"""Running a server in the foreground of a command: start, announce, stop on SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
from typing import Awaitable, Callable


async def run_until_signalled(start: Callable[[], Awaitable[None]], stop: Callable[[], Awaitable[None]],
                              on_started: Callable[[], None] = lambda: None) -> None:
    await start()
    on_started()
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    try:
        await stopping.wait()
    finally:
        await stop()
