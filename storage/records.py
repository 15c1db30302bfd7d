"""The base of storage's value types (commands, mutations, results): frozen msgspec Structs.

Every request builds several of these (a send: its command, its MessageRecord, the
MessageAdded that carries it, its result), so their constructors are on the hot path. A Struct
is built in C: a 20-field MessageRecord cost ~1,700 instructions against ~4,200 for a slotted
dataclass, whose ``__init__`` is Python code (and a frozen one's ``object.__setattr__`` per
field several times that). Being frozen costs a Struct nothing, so records are immutable
everywhere, not only in tests. Equality, hashing and ``repr`` are by field, in declaration
order, as they were for the dataclasses; ``msgspec.structs.fields`` lists the fields and
``msgspec.structs.replace`` copies one with changes.

Records are not tracked by the cycle collector (``gc=False``): they are immutable values made
of strings, numbers, bytes, tuples, mappings of those and other records, so no cycle can run
through one, and reference counting frees them. Untracked, a stored message is one object less
for every collection to walk (see elasticmq_py/gcpolicy.py), and building one is cheaper.

``FROZEN`` is for the few dataclasses elsewhere that are frozen only under
``ELASTICMQ_PY_FROZEN=1`` (the test suite), where that costs a setter call per field.
"""

from __future__ import annotations

import os

import msgspec

FROZEN = os.environ.get("ELASTICMQ_PY_FROZEN") == "1"


class Record(msgspec.Struct, frozen=True, gc=False):
    """Immutable, compared and hashed by value."""
