"""A stable hash of storage state, for proving that members converged.

It hashes a canonical form of its own (dataclasses as [name, fields...], mappings sorted by key)
rather than the wire codec's bytes, so that a change of wire format never changes a digest and
the digest never depends on dict insertion order.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Iterable, Mapping

import msgpack


def canonical(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [type(value).__name__, *(canonical(getattr(value, f.name)) for f in dataclasses.fields(value))]
    if isinstance(value, Mapping):
        return [[canonical(k), canonical(v)] for k, v in sorted(value.items(), key=lambda kv: repr(kv[0]))]
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    return value


def digest_records(records: Iterable[Any]) -> str:
    h = hashlib.blake2b(digest_size=20)
    packer = msgpack.Packer(use_bin_type=True)
    for record in records:
        if type(record).__name__ == "QueueRestored":
            # dedup/attempt windows are sets for the digest's purposes: their order is an index
            record = dataclasses.replace(record, dedup=tuple(sorted(record.dedup, key=lambda d: d.key)),
                                         attempts=tuple(sorted(record.attempts, key=lambda a: a.attempt_id)))
        h.update(packer.pack(canonical(record)))
    return h.hexdigest()
