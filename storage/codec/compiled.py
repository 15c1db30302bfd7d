"""The compiled path: frames made only of sends, receives and deletes, read and written by
msgspec in C."""

from __future__ import annotations

import typing
from typing import Any

import msgspec

from storage import commands as _c
from storage import mutations as _m
from storage.codec.schema import _TAG_OF

# --- the compiled path ----------------------------------------------------------------------------
#
# The replication stream and the journal are mostly sends, receives and deletes. Those classes,
# and the records nested in them, are also declared to msgspec as tagged arrays
# (``array_like=True, tag=<their TAGS entry>, forbid_unknown_fields=True`` on the class), which
# is exactly the object layout of the format (storage/codec/__init__.py): ``[tag, field
# values...]``, trailing fields with defaults optional, no more fields than the class has. So
# msgspec reads and writes a frame made only of them in C. Recovering 1,000,000 sends from a
# journal spent 1.8 s unpacking and building them the general way, 0.4 s this way; encoding a
# send's MessageAdded costs a fifth.
#
# It changes no answer, only the speed. Both ways check every field's type (bool is not int,
# bytes is not str), the tag and the number of fields, and build equal objects; encoding
# writes the same bytes (tests/storage/test_codec_compiled.py holds both ways to that). A
# frame that holds anything else, or that msgspec refuses for any reason, goes the general way,
# which decodes it or raises the precise CodecError. Empty attribute maps come back as the shared
# ``NO_ATTRIBUTES``, as they do the general way.

_COMPILED: tuple[type, ...] = (_m.MessageAdded, _m.MessageChanged, _m.MessageDeleted)
_COMPILED_NESTED: tuple[type, ...] = (_m.MessageRecord, _m.DedupEntry, _c.MessageAttributeValue)
for _cls in _COMPILED + _COMPILED_NESTED:
    _cfg = _cls.__struct_config__
    if not (_cfg.array_like and _cfg.tag == _TAG_OF[_cls] and _cfg.forbid_unknown_fields):  # pragma: no cover
        raise RuntimeError(f"storage.codec: {_cls.__name__} must be declared array_like, "
                           f"forbid_unknown_fields, with tag={_TAG_OF[_cls]} (its TAGS entry)")
del _cls, _cfg
_COMPILED_SET = frozenset(_COMPILED)
_compiled_decode = msgspec.msgpack.Decoder(list[typing.Union[_COMPILED]]).decode   # type: ignore[valid-type]
_compiled_encode = msgspec.msgpack.Encoder().encode
_EXPECTED: dict[Any, bool] = {}


def _compiled_expected(expect: type | tuple[type, ...]) -> bool:
    """Whether every compiled class is an instance of ``expect``: then what the compiled path
    built needs no check one by one."""
    ok = _EXPECTED.get(expect)
    if ok is None:
        ok = _EXPECTED[expect] = all(issubclass(c, expect) for c in _COMPILED)
    return ok


_force_setattr = msgspec.structs.force_setattr
_MessageAdded = _m.MessageAdded
_NO_ATTRIBUTES = _m.NO_ATTRIBUTES


def _share_empty_maps(objs: list) -> None:
    for m in objs:
        if type(m) is _MessageAdded:
            r = m.message
            if not r.attributes:
                _force_setattr(r, "attributes", _NO_ATTRIBUTES)
            if not r.system_attributes:
                _force_setattr(r, "system_attributes", _NO_ATTRIBUTES)
