"""The row form's encoders: per class, a generated function obj -> (tag, field values...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Callable

from storage import errors as _e
from storage.codec.schema import TAGS, _TAG_OF, _identifier, _nested_class, _schema


def _make_encoder(cls: type, tag: int) -> Callable[[Any], Any]:
    """obj -> (tag, field values...); msgpack packs the values, calling ``_default`` for ours."""
    names, hints, _req = _schema(cls)
    if cls is _e.SqsError:
        return lambda err: (tag, err.kind, err.message)
    # Fields declared as one registered class, or that or None (MessageAdded.message, .dedup),
    # are encoded here rather than through msgpack's ``default`` callback, which is slower. A value
    # of any other type (None, a subclass) is left to msgpack and ``_default``.
    env: dict[str, Any] = {}
    reads = []
    fields = []
    for i, n in enumerate(names):
        sub = _nested_class(hints[n])
        if sub is None:
            fields.append(f"obj.{_identifier(n)}")
            continue
        env[f"cls{i}"] = sub
        reads.append(f"    v{i} = obj.{_identifier(n)}\n")
        sub_names, sub_hints, _ = _schema(sub)
        if sub is not _e.SqsError and not any(_nested_class(sub_hints[m]) for m in sub_names):
            # A flat class (MessageRecord, DedupEntry): its tuple is built right here, sparing
            # a call per nested object.
            inner = "".join(f"v{i}.{_identifier(m)}, " for m in sub_names)
            fields.append(f"({_TAG_OF[sub]}, {inner}) if type(v{i}) is cls{i} else v{i}")
        else:
            env[f"enc{i}"] = _encoder(_TAG_OF[sub])
            fields.append(f"enc{i}(v{i}) if type(v{i}) is cls{i} else v{i}")
    src = (f"def encode_{cls.__name__}(obj):\n{''.join(reads)}"
           f"    return ({tag}, {''.join(f + ', ' for f in fields)})\n")
    exec(src, env)  # noqa: S102 - source built above from dataclass field names only
    return env[f"encode_{cls.__name__}"]


_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def _encoder(tag: int) -> Callable[[Any], Any]:
    cls = TAGS[tag]
    enc = _ENCODERS.get(cls)
    if enc is None:
        enc = _ENCODERS[cls] = _make_encoder(cls, tag)
    return enc


for _tag in TAGS:
    _encoder(_tag)
del _tag
_SQS_ERROR_ENCODER = _ENCODERS[_e.SqsError]


def _default(obj: Any) -> Any:
    """msgpack calls this for every value it cannot pack natively: our objects, mostly."""
    enc = _ENCODERS.get(type(obj))
    if enc is not None:
        return enc(obj)
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, _e.SqsError):  # a subclass: sent as the base class
        return _SQS_ERROR_ENCODER(obj)
    raise TypeError(f"cannot encode a {type(obj).__name__}")
