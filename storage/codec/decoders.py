"""The row form's decoders: per tag, a function [tag, field values...] -> obj that checks
every value's type on the way."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from itertools import repeat
from typing import Any, Callable

from storage import errors as _e
from storage import mutations as _m
from storage.codec.schema import TAGS, _TAG_OF, CodecError, _is_struct, _NoneType, _schema, _union_members

# --- decoding -----------------------------------------------------------------------------------
#
# Each field has a set of msgpack types it may arrive as (its "accepts") and, if it needs
# reshaping (tuples, mappings, nested objects), a converter that takes the freshly unpacked value
# and returns the typed one or raises CodecError. Scalar fields (str, int, bool, bytes, None and
# unions of those) need no converter. A class decoder checks all fields' types at once by looking
# up the tuple of their types in a cache of signatures already found valid, and only walks the
# fields one by one for a signature it has not seen.

_SCALARS = {str: str, int: int, bool: bool, bytes: bytes, _NoneType: _NoneType}
_contains = frozenset.__contains__


def _bad(what: str, value: Any) -> CodecError:
    return CodecError(f"expected {what}, got {type(value).__name__}")


class _Conv(typing.NamedTuple):
    accepts: frozenset            # msgpack types this field may arrive as (cheap pre-check)
    convert: Callable[[Any], Any] | None   # None: the value is already right


_DECODERS: dict[int, Callable[[list], Any]] = {}   # tag -> decoder of [tag, fields...]


def _conv_for(hint: Any, owner: type) -> _Conv:
    if hint in _SCALARS:
        return _Conv(frozenset((_SCALARS[hint],)), None)
    if hint in _TAG_OF:
        return _Conv(frozenset((list,)), _decoder(_TAG_OF[hint]))
    members = _union_members(hint)
    if members is not None:
        optional = _NoneType in members
        rest = [m for m in members if m is not _NoneType]
        if all(m in _SCALARS for m in rest):
            return _Conv(frozenset(_SCALARS[m] for m in members), None)
        if len(rest) == 1:
            inner = _conv_for(rest[0], owner)
            accepts = inner.accepts | {_NoneType} if optional else inner.accepts
            fn = inner.convert
            if fn is None:
                return _Conv(accepts, None)
            if not optional:  # pragma: no cover - a one-member union is not a union
                return _Conv(accepts, fn)
            return _Conv(accepts, lambda v: None if v is None else fn(v))
        if all(m in _TAG_OF for m in rest):
            allowed = frozenset(_TAG_OF[m] for m in rest)

            def tagged(v: Any) -> Any:
                if v is None and optional:
                    return None
                if type(v) is not list or not v or type(v[0]) is not int or v[0] not in allowed:
                    raise _bad("one of " + ", ".join(m.__name__ for m in rest), v)
                return _DECODERS[v[0]](v)
            accepts = frozenset((list, _NoneType)) if optional else frozenset((list,))
            return _Conv(accepts, tagged)
        raise TypeError(f"storage.codec: unsupported union {hint!r} in {owner.__name__}")
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return _Conv(frozenset((list,)), _var_tuple(_conv_for(args[0], owner)))
        if args == ((),) or not args:  # pragma: no cover - tuple[()]
            args = ()
        return _Conv(frozenset((list,)), _fixed_tuple([_conv_for(a, owner) for a in args]))
    if origin is Mapping or origin is dict:
        key_hint, value_hint = args
        if key_hint is not str:
            raise TypeError(f"storage.codec: mapping keys must be str ({hint!r} in {owner.__name__})")
        return _Conv(frozenset((dict,)),
                     _str_map(_conv_for(value_hint, owner), _m.NO_ATTRIBUTES if owner in _SHARED_EMPTY else None))
    raise TypeError(f"storage.codec: unsupported field type {hint!r} in {owner.__name__}")


def _var_tuple(elem: _Conv) -> Callable[[Any], tuple]:
    accepts, fn = elem

    if fn is None:
        if len(accepts) == 1:
            (only,) = accepts

            def scalar_tuple(v: Any) -> tuple:
                for e in v:
                    if type(e) is not only:
                        raise _bad(only.__name__, e)
                return tuple(v)
            return scalar_tuple

        def scalars_tuple(v: Any) -> tuple:
            if not all(map(_contains, [accepts] * len(v), map(type, v))):
                raise CodecError("wrong element type in a tuple")
            return tuple(v)
        return scalars_tuple

    def conv_tuple(v: Any) -> tuple:
        for e in v:
            if type(e) not in accepts:
                raise _bad("/".join(sorted(t.__name__ for t in accepts)), e)
        return tuple(map(fn, v))
    return conv_tuple


def _fixed_tuple(elems: list[_Conv]) -> Callable[[Any], tuple]:
    n = len(elems)
    sets = tuple(e.accepts for e in elems)
    convs = tuple((i, e.convert) for i, e in enumerate(elems) if e.convert is not None)

    def fixed(v: Any) -> tuple:
        if len(v) != n:
            raise CodecError(f"expected a {n}-tuple, got {len(v)} items")
        if not all(map(_contains, sets, map(type, v))):
            raise CodecError("wrong element type in a tuple")
        for i, fn in convs:
            v[i] = fn(v[i])
        return tuple(v)
    return fixed


# Classes whose empty mappings decode as the one shared, read-only ``NO_ATTRIBUTES``: a stored
# message's two empty attribute maps were 128 bytes of the ~900 it cost on a replica.
_SHARED_EMPTY = frozenset({_m.MessageRecord})


def _str_map(value: _Conv, empty: dict | None = None) -> Callable[[Any], dict]:
    accepts, fn = value
    if fn is None and accepts == frozenset((str,)):
        def str_str(d: dict) -> dict:
            if not d:
                return d if empty is None else empty
            for k, x in d.items():
                if type(k) is not str or type(x) is not str:
                    raise CodecError("expected a map of str to str")
            return d
        return str_str

    def str_any(d: dict) -> dict:
        if not d:
            return d if empty is None else empty
        for k, x in d.items():
            if type(k) is not str or type(x) not in accepts:
                raise CodecError("wrong key or value type in a map")
        if fn is None:
            return d
        return {k: fn(x) for k, x in d.items()}
    return str_any


def _wrong_object(v: Any, tag: int) -> Any:
    if type(v) is not list:
        raise _bad(TAGS[tag].__name__, v)
    if not v:
        raise CodecError(f"expected {TAGS[tag].__name__}, got an empty array")
    raise CodecError(f"expected {TAGS[tag].__name__} (tag {tag}), got tag {v[0]!r}")


def _sqs_error(kind: _e.ErrorKind, message: str) -> _e.SqsError:
    return _e.SqsError(_CANONICAL_KINDS.get(kind, kind), message)


# Decoded ErrorKinds equal to a module-level constant of storage.errors come back as that constant.
_CANONICAL_KINDS: dict[_e.ErrorKind, _e.ErrorKind] = {
    k: k for k in vars(_e).values() if isinstance(k, _e.ErrorKind)
}


_MAX_SIGNATURES = 4096
_set_slot = types.MemberDescriptorType.__set__
_new_object = object.__new__


def _make_decoder(cls: type, tag: int) -> Callable[[list], Any]:
    names, hints, required = _schema(cls)
    convs = [_conv_for(hints[n], cls) for n in names]
    nfields = len(names)
    sets = tuple(c.accepts for c in convs)
    # per accepted field count: the converters that apply (omitted trailing fields take defaults)
    by_count = {
        n: tuple((i, c.convert) for i, c in enumerate(convs[:n]) if c.convert is not None)
        for n in range(required, nfields + 1)
    }
    full_steps = by_count[nfields]
    name = cls.__name__
    # Field type signatures seen to be valid: checking one is a tuple hash instead of a loop.
    # Only valid ones are added, so the set is bounded by the product of the allowed-type sets.
    signatures: set[tuple] = set()

    # Building the object: a record's constructor is C and the cheapest way (_straight_decoder).
    # A frozen dataclass's __init__ sets each field through
    # object.__setattr__, which costs more than all the rest of decoding. For slotted classes
    # without __post_init__ the slots are filled directly (as pickle and copy would); the values
    # are exactly what __init__ would store.
    descriptors = tuple(vars(cls).get(n) for n in names)
    direct = (
        cls is not _e.SqsError
        and not _is_struct(cls)
        and not hasattr(cls, "__post_init__")
        and len(dataclasses.fields(cls)) == nfields          # no init=False fields to compute
        and all(type(d) is types.MemberDescriptorType for d in descriptors)
    )
    make = _sqs_error if cls is _e.SqsError else cls

    def slow_check(args: list) -> None:
        for fname, s, a in zip(names, sets, args):
            if type(a) not in s:
                raise CodecError(f"{name}.{fname}: unexpected {type(a).__name__}")

    def general(v: list) -> Any:
        if not v or v[0] != tag or type(v[0]) is not int:
            _wrong_object(v, tag)
        args = v[1:]
        if len(args) == nfields:
            sig = tuple(map(type, args))
            if sig not in signatures:
                slow_check(args)
                if len(signatures) < _MAX_SIGNATURES:
                    signatures.add(sig)
            for i, fn in full_steps:
                args[i] = fn(args[i])
            if direct:
                obj = _new_object(cls)
                any(map(_set_slot, descriptors, repeat(obj), args))
                return obj
            return make(*args)
        # an older sender: trailing fields omitted, their defaults apply
        steps = by_count.get(len(args))
        if steps is None:
            raise CodecError(f"{name}: {len(args)} fields, expected "
                             f"{required}..{nfields}")
        slow_check(args)
        for i, fn in steps:
            args[i] = fn(args[i])
        return make(*args)

    if not direct and not _is_struct(cls):
        return general
    return _straight_decoder(cls, tag, sets, convs, descriptors, general)


def _straight_decoder(cls: type, tag: int, sets: tuple, convs: list, descriptors: tuple,
                      general: Callable[[list], Any]) -> Callable[[list], Any]:
    """The common case as straight-line code: all fields present, each of an expected type.
    Anything else (an older sender's shorter list, a wrong type, a wrong tag) goes to
    ``general``, which decodes it or raises the precise error. Generated because a snapshot
    chunk is thousands of records: the signature tuple, its hashing and the per-field calls
    of the generic loop were most of a transfer's restore time."""
    n = len(sets)
    env: dict[str, Any] = {"cls": cls, "new": _new_object, "general": general, "list": list, "int": int}
    args = [f"a{i}" for i in range(n)]
    checks = []
    for i, accepts in enumerate(sets):
        if len(accepts) == 1:
            (only,) = accepts
            env[f"T{i}"] = only
            checks.append(f"type(a{i}) is T{i}")
        else:
            env[f"S{i}"] = accepts
            checks.append(f"type(a{i}) in S{i}")
    lines = [f"def dec(v):",
             f"    if type(v) is not list or len(v) != {n + 1} or type(v[0]) is not int or v[0] != {tag}:",
             "        return general(v)",
             f"    _, {', '.join(args)}{',' if n == 1 else ''} = v" if n else "    pass",
             f"    if not ({' and '.join(checks) or 'True'}):",
             f"        return general(v)"]
    for i, c in enumerate(convs):
        if c.convert is not None:
            env[f"C{i}"] = c.convert
            lines.append(f"    a{i} = C{i}(a{i})")
    if _is_struct(cls) or (not cls.__dataclass_params__.frozen and all(f.init for f in dataclasses.fields(cls))):
        # A record's constructor (C) or a plain __init__ stores the same values and is 6x
        # faster than one slot setter call per field (a snapshot restores millions of
        # records). Frozen dataclasses would pay object.__setattr__ per field.
        lines.append(f"    return cls({', '.join(args)})")
    else:
        lines.append("    o = new(cls)")
        for i, d in enumerate(descriptors):
            env[f"D{i}"] = d.__set__
            lines.append(f"    D{i}(o, a{i})")
        lines.append("    return o")
    exec("\n".join(lines) + "\n", env)  # noqa: S102 - built from dataclass field positions only
    return env["dec"]


def _decoder(tag: int) -> Callable[[list], Any]:
    """The decoder of a tag, building those of nested classes first (memoized)."""
    dec = _DECODERS.get(tag)
    if dec is None:
        if tag in _BUILDING:  # a recursive schema: bind late
            return lambda v: _DECODERS[tag](v)
        _BUILDING.add(tag)
        dec = _DECODERS[tag] = _make_decoder(TAGS[tag], tag)
        _BUILDING.discard(tag)
    return dec


_BUILDING: set[int] = set()
for _tag in TAGS:
    _decoder(_tag)
del _tag


def _decode_any(v: Any) -> Any:
    if type(v) is list and v:
        tag = v[0]
        if type(tag) is int:
            dec = _DECODERS.get(tag)
            if dec is not None:
                return dec(v)
            raise CodecError(f"unknown tag {tag}")
    if v is None:
        return None
    raise CodecError(f"expected a tagged object, got {type(v).__name__}")
