"""msgspec decoders for the JSON protocol's request bodies, one per action, built from the model.

Why: reading a SendMessage body with ``json`` and then checking the tree member by member in
Python (``params.from_json``) cost ~22,600 instructions; msgspec decodes and checks the types
in one pass in C for a tenth of that. Each action's input shape becomes a ``TypedDict`` (total=False),
so a decoded body is already the parameter tree ``from_json`` would build: a plain dict of the
known members, unknown members left out, integers in the shape's range, blobs base64-decoded.

These decoders are a fast path only, never the judge: whatever they refuse (null members, a
missing required member, a float for an integer, invalid UTF-8, lone surrogates, a BOM, NaN,
padding-free base64...) is read again by ``json`` and ``from_json``, which give the SQS error
a client expects or, where they are more lenient, the tree. Where both accept a body, they
build the same tree (tests/endpoint/test_json_types.py checks this differentially).
"""

from __future__ import annotations

from typing import Annotated, Any, Required, TypedDict

import msgspec

from elasticmq_py.protocol.model import ServiceModel, Shape

_INT_BOUNDS = {"integer": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}


class _Unsupported(Exception):
    """A shape type this module does not map: that action keeps only the slow path."""


def _type(shape: Shape, structs: dict[str, Any]) -> Any:
    t = shape.type
    if t == "string":
        return str
    if t in _INT_BOUNDS:
        lo, hi = _INT_BOUNDS[t]
        return Annotated[int, msgspec.Meta(ge=lo, le=hi)]
    if t == "boolean":
        return bool
    if t == "blob":
        return bytes   # base64 with padding, as base64.b64decode(validate=True) reads it
    if t == "list":
        return list[_type(shape.member, structs)]
    if t == "map":
        if shape.key.type != "string":
            raise _Unsupported(shape.key.type)
        return dict[str, _type(shape.value, structs)]
    if t == "structure":
        td = structs.get(shape.name)
        if td is None:
            fields = {name: (Required[_type(m, structs)] if name in shape.required else _type(m, structs))
                      for name, m in shape.members.items()}
            td = structs[shape.name] = TypedDict(shape.name, fields, total=False)  # type: ignore[operator]
        return td
    raise _Unsupported(t)


def decoders(model: ServiceModel) -> dict[str, msgspec.json.Decoder]:
    """action -> a decoder of its request body into the parameter tree (every action whose
    input shape maps; today all of them)."""
    structs: dict[str, Any] = {}
    out = {}
    for name, op in model.operations.items():
        try:
            out[name] = msgspec.json.Decoder(_type(op.input, structs))
        except _Unsupported:
            continue
    return out
