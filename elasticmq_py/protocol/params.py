"""Turning wire input into checked parameter trees, driven by the service model.

Both protocols end in the same value: a dict keyed by the model's member names, with ``str``,
``int``, ``bool``, ``bytes`` (blobs, already base64-decoded), lists and dicts, where an absent
member is simply missing. ``requests`` maps that tree to a typed command. Types and presence are
checked here; SQS semantics (ranges, names, sizes) are storage's.
"""

from __future__ import annotations

import base64
import binascii
import re
from bisect import bisect_left

from storage.errors import (
    INVALID_MESSAGE_CONTENTS,
    SqsError,
    invalid_parameter,
    missing_parameter,
)

from elasticmq_py.protocol.model import Shape

_SURROGATE = re.compile("[\ud800-\udfff]")
_INT = re.compile(r"[+-]?[0-9]{1,19}")
_TYPE_WORD = {"integer": "an integer", "long": "a long", "boolean": "a boolean",
              "string": "a string", "blob": "base64-encoded binary", "list": "a list",
              "map": "a map", "structure": "an object"}
_INT_RANGE = {"integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


def _bad_type(path: str, value: object, shape: Shape) -> SqsError:
    shown = value if isinstance(value, (str, int, float, bool)) else type(value).__name__
    if isinstance(shown, str) and len(shown) > 64:
        shown = shown[:64] + "..."
    return invalid_parameter(path, shown, f"must be {_TYPE_WORD.get(shape.type, shape.type)}")


def _check_text(path: str, s: str) -> str:
    # Lone surrogates come from \ud800 escapes in JSON or from invalid UTF-8 in a form (decoded
    # with surrogateescape). No SQS field allows them, and they cannot be UTF-8 encoded, so they
    # are refused here before storage ever hashes or stores them.
    if not s.isascii() and _SURROGATE.search(s):
        if path.endswith("MessageBody") or "MessageAttributes" in path:
            raise INVALID_MESSAGE_CONTENTS("Invalid binary character in the message contents.")
        raise invalid_parameter(path, repr(s[:64]), "contains characters outside the allowed set")
    return s


def _check_int(path: str, value: int, shape: Shape) -> int:
    lo, hi = _INT_RANGE["long" if shape.type == "long" else "integer"]
    if not lo <= value <= hi:
        raise invalid_parameter(path, value, f"must be {_TYPE_WORD[shape.type]}")
    return value


# --- JSON ------------------------------------------------------------------------------------

def from_json(shape: Shape, value: object, path: str = "") -> object:
    """Check a decoded JSON value against ``shape``; blobs come back as bytes. ``null`` members
    are dropped (the JSON protocol's way of saying "absent")."""
    t = shape.type
    if t == "string":
        if type(value) is not str:
            raise _bad_type(path, value, shape)
        return _check_text(path, value)
    if t == "structure":
        return _json_struct(shape, value, path)
    if t in ("integer", "long"):
        if type(value) is not int:
            raise _bad_type(path, value, shape)
        return _check_int(path, value, shape)
    if t == "list":
        if type(value) is not list:
            raise _bad_type(path, value, shape)
        m = shape.member
        if m.type == "structure":   # batch entries: one call per entry, not two
            return [_json_struct(m, v, f"{path}.{i}") for i, v in enumerate(value, 1)]
        return [from_json(m, v, f"{path}.{i}") for i, v in enumerate(value, 1)]
    if t == "map":
        if type(value) is not dict:
            raise _bad_type(path, value, shape)
        return {_check_text(f"{path}.key", k): from_json(shape.value, v, f"{path}.{k}")
                for k, v in value.items()}
    if t == "blob":
        if type(value) is not str:
            raise _bad_type(path, value, shape)
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise _bad_type(path, value, shape) from None
    if t == "boolean":
        if type(value) is not bool:
            raise _bad_type(path, value, shape)
        return value
    raise _bad_type(path, value, shape)  # a type the SQS model does not use


def _json_struct(shape: Shape, value: object, path: str) -> dict:
    if type(value) is not dict:
        raise _bad_type(path, value, shape)
    out = {}
    members = shape.members
    for name, v in value.items():
        m = members.get(name)
        if m is None or v is None:
            continue  # unknown members are ignored, as AWS does
        # the hot case, strings, is checked inline: most members of most requests are one
        if m.type == "string" and type(v) is str and v.isascii():
            out[name] = v
        else:
            out[name] = from_json(m, v, f"{path}.{name}" if path else name)
    for name in shape.required:    # _require, inline
        if name not in out:
            raise missing_parameter(f"{path}.{name}" if path else name)
    return out


def _require(shape: Shape, out: dict, path: str) -> None:
    for name in shape.required:
        if name not in out:
            raise missing_parameter(f"{path}.{name}" if path else name)


# --- Query -----------------------------------------------------------------------------------

def from_query(shape: Shape, params: dict[str, str]) -> dict:
    """Decode a flat Query form (``Attribute.1.Name=...``) into the parameter tree, following
    botocore's Query serializer rules in reverse."""
    index = _PrefixIndex(params)
    out = _q_struct(shape, "", index)
    return out if out is not None else {}


class _PrefixIndex:
    """The form's keys, so that "which list indices exist under P" is cheap to answer."""

    def __init__(self, params: dict[str, str]):
        self.params = params
        # Only dotted keys (Entry.1.Id, Attribute.2.Name...) can be under a prefix: the callers'
        # prefixes all end in "." or get one. Most requests (a send, a receive) have none.
        self.keys = sorted(k for k in params if "." in k)

    def has_prefix(self, prefix: str) -> bool:
        keys = self.keys
        if not keys:
            return False
        i = bisect_left(keys, prefix)
        return i < len(keys) and keys[i].startswith(prefix)

    def indices(self, prefix: str) -> list[int]:
        keys = self.keys
        if not keys:
            return []
        p = prefix + "."
        i = bisect_left(keys, p)
        if i == len(keys) or not keys[i].startswith(p):
            return []               # the common answer (an absent map or list): no set, no sort
        found: set[int] = set()
        while i < len(keys) and keys[i].startswith(p):
            head = keys[i][len(p):].split(".", 1)[0]
            if head.isdigit() and len(head) < 6:
                found.add(int(head))
            i += 1
        return sorted(found)


def _q_name(member_name: str, shape: Shape) -> str:
    return shape.location_name or member_name


def _q_value(shape: Shape, key: str, index: _PrefixIndex, path: str) -> object | None:
    t = shape.type
    if t == "structure":
        return _q_struct(shape, key, index, path)
    if t == "list":
        return _q_list(shape, key, index, path)
    if t == "map":
        return _q_map(shape, key, index, path)
    raw = index.params.get(key)
    if raw is None:
        return None
    if t == "string":
        return _check_text(path, raw)
    if t in ("integer", "long"):
        if not _INT.fullmatch(raw.strip()):
            raise _bad_type(path, raw, shape)
        return _check_int(path, int(raw), shape)
    if t == "blob":
        try:
            return base64.b64decode(raw, validate=True)
        except (binascii.Error, ValueError):
            raise _bad_type(path, raw, shape) from None
    if t == "boolean":
        if raw.lower() not in ("true", "false"):
            raise _bad_type(path, raw, shape)
        return raw.lower() == "true"
    raise _bad_type(path, raw, shape)


_PLANS: dict[Shape, tuple[tuple[str, Shape, str, str], ...]] = {}


def _plan(shape: Shape) -> tuple[tuple[str, Shape, str, str], ...]:
    """A structure's members as (name, shape, Query name, type), computed once per shape."""
    plan = _PLANS.get(shape)
    if plan is None:
        plan = _PLANS[shape] = tuple((name, m, _q_name(name, m), m.type) for name, m in shape.members.items())
    return plan


def _q_struct(shape: Shape, prefix: str, index: _PrefixIndex, path: str = "") -> dict | None:
    if prefix and not index.has_prefix(prefix + "."):
        return None
    out = {}
    params = index.params
    for name, m, q, t in _plan(shape):
        key = f"{prefix}.{q}" if prefix else q
        if t == "string":
            # the hot case inline, as _q_value would do it
            raw = params.get(key)
            if raw is not None:
                out[name] = raw if raw.isascii() else _check_text(f"{path}.{name}" if path else name, raw)
            continue
        v = _q_value(m, key, index, f"{path}.{name}" if path else name)
        if v is not None:
            out[name] = v
    _require(shape, out, path)
    return out


def _list_prefix(shape: Shape, key: str) -> str:
    if shape.flattened:
        # a flattened list's elements take the member's name in place of the list's own
        name = shape.member.location_name
        if name:
            head, _, _ = key.rpartition(".")
            return f"{head}.{name}" if head else name
        return key
    return f"{key}.{shape.member.location_name or 'member'}"


def _q_list(shape: Shape, key: str, index: _PrefixIndex, path: str) -> list | None:
    prefix = _list_prefix(shape, key)
    idx = index.indices(prefix)
    if not idx:
        # botocore sends an empty list as "Name=" with no elements
        return [] if index.params.get(key) == "" or index.params.get(prefix) == "" else None
    out = []
    for i in idx:
        v = _q_value(shape.member, f"{prefix}.{i}", index, f"{path}.{i}")
        if v is not None:
            out.append(v)
    return out


def _q_map(shape: Shape, key: str, index: _PrefixIndex, path: str) -> dict | None:
    prefix = key if shape.flattened else f"{key}.entry"
    idx = index.indices(prefix)
    if not idx:
        return None
    kname = shape.key.location_name or "key"
    vname = shape.value.location_name or "value"
    out = {}
    for i in idx:
        k = index.params.get(f"{prefix}.{i}.{kname}")
        if k is None:
            raise missing_parameter(f"{prefix}.{i}.{kname}")
        k = _check_text(f"{path}.key", k)
        v = _q_value(shape.value, f"{prefix}.{i}.{vname}", index, f"{path}.{k}")
        if v is None:
            raise missing_parameter(f"{prefix}.{i}.{vname}")
        out[k] = v
    return out
