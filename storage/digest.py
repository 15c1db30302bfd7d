"""A stable hash of storage state, for proving that members converged.

It hashes a canonical form of its own (records and dataclasses as [name, fields...], mappings
sorted by key) rather than the wire codec's bytes, so that a change of wire format never changes
a digest and the digest never depends on dict insertion order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import operator
from collections.abc import Mapping
from typing import Any, Iterable

import msgpack
import msgspec


_SCALARS = frozenset({str, int, float, bool, bytes, type(None)})
_GETTERS: dict[type, Any] = {}


def _field_names(t: type) -> tuple[str, ...] | None:
    """The fields of a record (a msgspec Struct) or a dataclass, in order; None for anything else."""
    if issubclass(t, msgspec.Struct):
        return t.__struct_fields__
    if dataclasses.is_dataclass(t):
        return tuple(f.name for f in dataclasses.fields(t))
    return None


def _getter(t: type) -> Any:
    # dataclasses.fields() and a recursive call per field made a digest of 100,000 messages
    # take seconds (and a status request asking for it stalled the node): one attrgetter per
    # type reads all fields at once, and scalars are kept without a call.
    g = _GETTERS.get(t)
    if g is None:
        names = _field_names(t)
        if names:
            get = operator.attrgetter(*names)
            g = (lambda v: (get(v),)) if len(names) == 1 else get
        else:
            g = False
        _GETTERS[t] = g
    return g


def canonical(value: Any) -> Any:
    t = type(value)
    if t in _SCALARS:
        return value
    get = _getter(t)
    if get:
        scalars = _SCALARS
        return [t.__name__, *[v if type(v) in scalars else canonical(v) for v in get(value)]]
    if t is tuple or t is list:
        return [canonical(v) for v in value]
    if t is dict or isinstance(value, Mapping):
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
            record = msgspec.structs.replace(record, dedup=tuple(sorted(record.dedup, key=lambda d: d.key)),
                                         attempts=tuple(sorted(record.attempts, key=lambda a: a.attempt_id)))
        h.update(packer.pack(canonical(record)))
    return h.hexdigest()
