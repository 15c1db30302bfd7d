"""Values for the codec tests: hypothesis strategies built from the type hints (independently of
the codec's own walk of them), a sample message record, raw frames, and ``same``."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import types
import typing
from collections.abc import Mapping

import msgpack
import msgspec
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import storage.codec as codec
from storage import errors, mutations
from storage.codec import FORMAT_VERSION, TAGS

# Kept small so the file runs in seconds; raise them locally when hunting for something.
EACH = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

REGISTERED = sorted(TAGS.values(), key=lambda c: codec.tag_of(c))
ONE = bytes((FORMAT_VERSION, 0))
MANY = bytes((FORMAT_VERSION, 1))


def is_value_type(cls: type) -> bool:
    """A record (a msgspec Struct: commands, mutations, results) or one of the few dataclasses
    the codec also carries (QueueKey, ErrorKind)."""
    return issubclass(cls, msgspec.Struct) or dataclasses.is_dataclass(cls)


def field_names(cls: type) -> tuple[str, ...]:
    if issubclass(cls, msgspec.Struct):
        return cls.__struct_fields__
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


# --- strategies, built from the type hints (independently of the codec's own walk) ---------------

TEXT = st.text(max_size=12)
INTS = st.integers(min_value=-(2**63), max_value=2**64 - 1)   # what msgpack can carry


def for_hint(hint: typing.Any) -> st.SearchStrategy:
    if hint is str:
        return TEXT
    if hint is bool:
        return st.booleans()
    if hint is int:
        return INTS
    if hint is bytes:
        return st.binary(max_size=12)
    if hint is type(None):
        return st.none()
    if isinstance(hint, type) and (is_value_type(hint) or hint is errors.SqsError):
        return st.deferred(lambda: for_class(hint))
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        return st.one_of([for_hint(a) for a in args])
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(for_hint(args[0]), max_size=3).map(tuple)
        return st.tuples(*[for_hint(a) for a in args])
    if origin is Mapping or origin is dict:
        return st.dictionaries(for_hint(args[0]), for_hint(args[1]), max_size=3)
    raise AssertionError(f"no strategy for {hint!r}")


KNOWN_KINDS = [k for k in vars(errors).values() if isinstance(k, errors.ErrorKind)]


@functools.cache
def for_class(cls: type) -> st.SearchStrategy:
    if cls is errors.SqsError:
        kinds = st.one_of(st.sampled_from(KNOWN_KINDS), for_class(errors.ErrorKind))
        return st.builds(errors.SqsError, kinds, TEXT)
    hints = typing.get_type_hints(cls, vars(inspect.getmodule(cls)))
    return st.builds(cls, **{name: for_hint(hints[name]) for name in field_names(cls)})


ANY_REGISTERED = st.sampled_from(REGISTERED).flatmap(for_class)
ANY_MUTATION = st.sampled_from(typing.get_args(mutations.Mutation)).flatmap(for_class)


def same(a: typing.Any, b: typing.Any) -> bool:
    """Equal, and of exactly the same types all the way down (tuples stay tuples, ...)."""
    if isinstance(a, errors.SqsError):
        return type(b) is errors.SqsError and a.kind == b.kind and a.message == b.message
    if type(a) is not type(b):
        # a Mapping field may be any mapping on the way in; it comes back a dict (a message's
        # empty attribute maps: the shared read-only one)
        if b is mutations.NO_ATTRIBUTES:
            return isinstance(a, Mapping) and not a
        return isinstance(a, Mapping) and type(b) is dict and same(dict(a), b)
    if is_value_type(type(a)):
        return all(same(getattr(a, n), getattr(b, n)) for n in field_names(type(a)))
    if isinstance(a, tuple):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(v, b[k]) for k, v in a.items())
    return a == b


def message_record(**changes) -> mutations.MessageRecord:
    values = dict(
        message_id="2b1c6d2e-4f1a-4c5e-9d3b-7a8f0e1d2c3b", serial=42, body="x" * 100,
        attributes={}, system_attributes={}, md5_of_body="d41d8cd98f00b204e9800998ecf8427e",
        md5_of_attributes=None, md5_of_system_attributes=None, sent_ms=1_700_000_000_000,
        sender_id="000000000000", group_id=None, deduplication_id=None, sequence_number=None,
        dlq_source_arn=None, version=1, receipt=None, visible_ms=1_700_000_000_000,
        receive_count=0, first_receive_ms=0, last_receive_ms=0)
    values.update(changes)
    return mutations.MessageRecord(**values)


def frame(value, many=False) -> bytes:
    return (MANY if many else ONE) + msgpack.packb(value, use_bin_type=True)


# msgpack values shaped like objects: real tags, random fields, so decoders see every wrong type.
SCALAR_VALUES = st.one_of(st.none(), st.booleans(), INTS, st.floats(allow_nan=False), TEXT,
                          st.binary(max_size=4))
TAG_VALUES = st.sampled_from(sorted(TAGS) + sorted(codec.COLUMNAR_TAGS))
WIRE_VALUES = st.recursive(
    SCALAR_VALUES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(TEXT, st.binary(max_size=3), st.integers(0, 3)), inner, max_size=3),
        st.builds(lambda tag, rest: [tag, *rest], TAG_VALUES, st.lists(inner, max_size=8)),
    ),
    max_leaves=10,
)
