"""Identifiers decided on the master: message ids, receipt nonces, move-task ids.

They come from a seedable generator so that the simulator is deterministic; live nodes seed it
from the OS. Replicas never draw from it: they copy what the master decided, from the mutation.
"""

from __future__ import annotations

import random

_COUNTER_SPACE = 1 << 48


class IdSource:
    def __init__(self, seed: int | None = None):
        self._rng = random.Random(seed if seed is not None else random.SystemRandom().getrandbits(64))
        self._bits = self._rng.getrandbits
        self._new_prefix()

    def _new_prefix(self) -> None:
        # 74 random bits per prefix make two sources (two masters, before and after a failover)
        # collide with negligible probability; the counter makes ids within one source unique.
        n = self._bits(80)
        h = f"{n:020x}"
        self._prefix = f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[n & 3]}{h[17:20]}-"
        self._counter = self._bits(47)

    def uuid(self) -> str:
        """A UUID-shaped (version 4 layout) id, as SQS message ids are. Drawing a full random
        UUID per message cost ~2 us; a random prefix plus a counter costs a tenth of that."""
        c = self._counter
        if c >= _COUNTER_SPACE:
            self._new_prefix()
            c = self._counter
        self._counter = c + 1
        # The counter's 12 hex digits, zero-padded, as its 6 bytes in hex: a third cheaper
        # than formatting with a "012x" spec.
        return self._prefix + c.to_bytes(6, "big").hex()

    def nonce(self) -> str:
        """64 random bits as 16 hex digits (zero-padded, as ``uuid`` formats its counter)."""
        return self._bits(64).to_bytes(8, "big").hex()
