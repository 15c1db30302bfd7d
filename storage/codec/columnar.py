"""The column form of snapshot groups (``MessagesRestored``), its encoder and decoder."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from itertools import repeat
from typing import Any, Callable

from storage import mutations as _m
from storage.codec.decoders import (
    _DECODERS, _bad, _conv_for, _new_object, _set_slot, _wrong_object,
)
from storage.codec.encoders import _ENCODERS
from storage.codec.schema import RETIRED_TAGS, TAGS, _TAG_OF, CodecError, _identifier, _is_struct, _schema

# --- columnar layout ----------------------------------------------------------------------------
#
# A state transfer is mostly MessagesRestored groups of up to 64 messages. Sent row by row, each
# message is a 21-item array, and unpacking, checking and building it took the joiner 3.2 us per
# message (in isolation, of 6.5 us in all); column by column, 2.1 us. A field that is the same
# for the whole group (most of them: no attributes, no receipt, no group, version 0...) is sent
# once, and the joiner unpacks only the fields that vary. Frames shrink by ~15% with distinct
# 100-byte bodies, ~4x when bodies repeat. A folded value is shared by every element it stands
# for, mappings included: records are immutable, and nothing mutates their mappings.
#
#     [tag, head fields..., n, column_0, ..., column_k]
#
# for a class whose *last* field is ``tuple[C, ...]`` of a registered class C: ``n`` is the tuple's
# length and ``column_i`` holds field i of every element, either as n values or, when all n are
# equal, as one value (a one-item array). A group of more than one element must have at least one
# full column, so that the objects built stay linear in the input. Columns past the ones sent take
# C's defaults (an older sender of a longer C). Such a class can gain no field (it would no longer
# end with the tuple): changing it means a new class.
#
# The class keeps its row tag in TAGS, and receivers still decode it (an older sender); encoders
# send the columnar tag. Like any new tag, receivers must be upgraded before senders.

COLUMNAR_TAGS: Mapping[int, type] = types.MappingProxyType({
    35: _m.MessagesRestored,
})
if COLUMNAR_TAGS.keys() & (TAGS.keys() | RETIRED_TAGS):  # pragma: no cover - a table edit gone wrong
    raise RuntimeError("storage.codec: a columnar tag collides with a row tag")


def _columnar_parts(cls: type) -> tuple[tuple[str, ...], str, type]:
    """(head field names, the tuple field's name, its element class)."""
    names, hints, _ = _schema(cls)
    *head, last = names
    args = typing.get_args(hints[last])
    if typing.get_origin(hints[last]) is not tuple or len(args) != 2 or args[1] is not Ellipsis \
            or args[0] not in _TAG_OF:  # pragma: no cover - a table edit gone wrong
        raise TypeError(f"storage.codec: {cls.__name__} does not end with tuple[Registered, ...]")
    return tuple(head), last, args[0]


def _make_columnar_encoder(cls: type, tag: int) -> Callable[[Any], Any]:
    head, last, elem = _columnar_parts(cls)
    elem_names, elem_hints, _ = _schema(elem)
    lines = [f"def encode_columns_{cls.__name__}(obj):",
             f"    rows = obj.{_identifier(last)}",
             "    n = len(rows)"]
    cols = []
    for i, m in enumerate(elem_names):
        lines.append(f"    c{i} = [r.{_identifier(m)} for r in rows]")
        # Equal values of different types (1 == True) must not fold into one: only where a
        # field accepts both does the fold look at types too.
        accepts = _conv_for(elem_hints[m], elem).accepts
        mixed = " and len(set(map(type, c%d))) == 1" % i if {int, bool} <= accepts else ""
        lines.append(f"    if n > 1 and c{i}.count(c{i}[0]) == n{mixed}:\n        del c{i}[1:]")
        cols.append(f"c{i}")
    # The decoder wants one full column when n > 1 (its memory bound); only n equal elements,
    # never a snapshot's (message ids differ), fold everywhere.
    lines.append(f"    if n > 1 and {' and '.join(f'len({c}) == 1' for c in cols)}:\n"
                 f"        c0 = [r.{_identifier(elem_names[0])} for r in rows]")
    heads = "".join(f"obj.{_identifier(h)}, " for h in head)
    lines.append(f"    return ({tag}, {heads}n, {', '.join(cols)})")
    env: dict[str, Any] = {}
    exec("\n".join(lines) + "\n", env)  # noqa: S102 - built from dataclass field names only
    return env[f"encode_columns_{cls.__name__}"]


def _builder(cls: type) -> Callable[..., Any]:
    """cls(*fields) by the cheapest road that stores the same values (see _straight_decoder)."""
    if _is_struct(cls):
        return cls
    fields = dataclasses.fields(cls)
    if not cls.__dataclass_params__.frozen or hasattr(cls, "__post_init__") \
            or not all(f.init for f in fields):
        return cls
    descriptors = tuple(vars(cls)[f.name] for f in fields)
    if not all(type(d) is types.MemberDescriptorType for d in descriptors):  # pragma: no cover
        return cls

    def build(*args: Any) -> Any:
        if len(args) != len(descriptors):
            return cls(*args)   # fields left out: __init__ fills the defaults
        obj = _new_object(cls)
        any(map(_set_slot, descriptors, repeat(obj), args))
        return obj
    return build


def _make_columnar_decoder(cls: type, tag: int) -> Callable[[list], Any]:
    head, _last, elem = _columnar_parts(cls)
    _names, hints, _ = _schema(cls)
    head_convs = [_conv_for(hints[h], cls) for h in head]
    elem_names, elem_hints, elem_required = _schema(elem)
    elem_convs = [_conv_for(elem_hints[m], elem) for m in elem_names]
    n_head, n_cols = len(head), len(elem_names)
    first_col = 2 + n_head
    build, build_elem = _builder(cls), _builder(elem)
    name = cls.__name__

    def dec(v: list) -> Any:
        if type(v) is not list or not v or v[0] != tag or type(v[0]) is not int:
            _wrong_object(v, tag)
        if not first_col + elem_required <= len(v) <= first_col + n_cols:
            raise CodecError(f"{name}: {len(v) - 1} fields in columnar form, expected "
                             f"{n_head + 1 + elem_required}..{n_head + 1 + n_cols}")
        heads = v[1:1 + n_head]
        for i, (accepts, fn) in enumerate(head_convs):
            if type(heads[i]) not in accepts:
                raise CodecError(f"{name}.{head[i]}: unexpected {type(heads[i]).__name__}")
            if fn is not None:
                heads[i] = fn(heads[i])
        n = v[1 + n_head]
        if type(n) is not int or n < 0:
            raise CodecError(f"{name}: bad element count {n!r}")
        columns: list[Any] = []
        full = False
        for i, col in enumerate(v[first_col:]):
            accepts, fn = elem_convs[i]
            if type(col) is not list:
                raise _bad(f"a column of {elem.__name__}.{elem_names[i]}", col)
            if len(col) == n:
                if not set(map(type, col)) <= accepts:
                    raise CodecError(f"{elem.__name__}.{elem_names[i]}: unexpected type in a column")
                columns.append(list(map(fn, col)) if fn is not None else col)
                full = True
            elif len(col) == 1:
                value = col[0]
                if type(value) not in accepts:
                    raise CodecError(f"{elem.__name__}.{elem_names[i]}: unexpected {type(value).__name__}")
                columns.append(repeat(fn(value) if fn is not None else value, n))
            else:
                raise CodecError(f"{elem.__name__}.{elem_names[i]}: a column of {len(col)}, "
                                 f"expected {n} or 1")
        if n > 1 and not full:
            raise CodecError(f"{name}: {n} elements and no full column")
        return build(*heads, tuple(map(build_elem, *columns)))
    return dec


for _tag, _cls in COLUMNAR_TAGS.items():
    _ENCODERS[_cls] = _make_columnar_encoder(_cls, _tag)
    _DECODERS[_tag] = _make_columnar_decoder(_cls, _tag)
del _tag, _cls
