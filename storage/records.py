"""The decorator for storage's value types: slotted dataclasses, immutable by contract.

CPython builds a frozen dataclass through ``object.__setattr__`` once per field: a 20-field
MessageRecord cost 4.6 us against 0.36 us for a plain slotted one on the reference machine, and
a send builds several records. So immutability is *enforced* (``frozen=True``) only when
``ELASTICMQ_PY_FROZEN=1`` is set, as ``make test`` does for the whole suite and the server
processes it starts; production builds the same classes without the per-field cost. Hashing is
explicit so both flavours hash alike. Types used as dict keys (QueueKey, Namespace) stay truly
frozen regardless.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

FROZEN = os.environ.get("ELASTICMQ_PY_FROZEN") == "1"


def record(cls: type[T]) -> type[T]:
    return dataclass(cls, slots=True, frozen=FROZEN, unsafe_hash=True)  # type: ignore[return-value]
