"""Identifiers decided on the master: message ids, receipt nonces, move-task ids.

They come from a seedable generator so that the simulator is deterministic; live nodes seed it
from the OS. Replicas never draw from it: they copy what the master decided, from the mutation.
"""

from __future__ import annotations

import random


class IdSource:
    def __init__(self, seed: int | None = None):
        self._rng = random.Random(seed if seed is not None else random.SystemRandom().getrandbits(64))
        self._bits = self._rng.getrandbits

    def uuid(self) -> str:
        """A random (version 4) UUID in canonical text form, as SQS message ids are."""
        n = (self._bits(128) & ~(0xF000 << 64) & ~(0xC000 << 48)) | (0x4000 << 64) | (0x8000 << 48)
        h = f"{n:032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    def nonce(self) -> str:
        return f"{self._bits(64):016x}"
