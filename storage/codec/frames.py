"""The envelope (format version and kind) and the codec's functions: ``encode``, ``decode``,
``encode_many`` and ``decode_many``."""

from __future__ import annotations

import threading
from typing import Any, Iterable

import msgpack

from storage import errors as _e
from storage.codec import columnar  # noqa: F401 - puts the column form of snapshot groups in the tables
from storage.codec.compiled import (
    _COMPILED_SET, _compiled_decode, _compiled_encode, _compiled_expected, _share_empty_maps,
)
from storage.codec.decoders import _decode_any
from storage.codec.encoders import _ENCODERS, _SQS_ERROR_ENCODER, _default
from storage.codec.schema import CodecError

FORMAT_VERSION = 1
_ONE = 0x00
_MANY = 0x01
_HEADER_ONE = bytes((FORMAT_VERSION, _ONE))
_HEADER_MANY = bytes((FORMAT_VERSION, _MANY))


_local = threading.local()
_unpackb = msgpack.unpackb


def _packer() -> msgpack.Packer:
    p = msgpack.Packer(use_bin_type=True, default=_default, datetime=False)
    _local.packer = p
    return p


def _top(obj: Any) -> Any:
    enc = _ENCODERS.get(type(obj))
    if enc is not None:
        return enc(obj)
    if obj is None:
        return None
    if isinstance(obj, _e.SqsError):
        return _SQS_ERROR_ENCODER(obj)
    raise CodecError(f"cannot encode a {type(obj).__name__}: not a registered storage type")


def encode(obj: Any) -> bytes:
    """One registered object (or ``None``) as a versioned frame."""
    enc = _ENCODERS.get(type(obj))
    value = enc(obj) if enc is not None else _top(obj)
    try:
        packer = _local.packer
    except AttributeError:
        packer = _packer()
    try:
        return _HEADER_ONE + packer.pack(value)
    except Exception as exc:
        packer.reset()
        raise CodecError(f"cannot encode {type(obj).__name__}: {exc}") from exc


def encode_many(objs: Iterable[Any]) -> bytes:
    """Many registered objects (or ``None``s) in one versioned frame, order kept."""
    if type(objs) is not list and type(objs) is not tuple:
        objs = list(objs)
    if all(map(_COMPILED_SET.__contains__, map(type, objs))):
        try:
            return _HEADER_MANY + _compiled_encode(objs)
        except Exception:   # noqa: BLE001 - anything msgspec will not write: the general way says why
            pass
    return _encode_many_general(objs)


def _encode_many_general(objs: list | tuple) -> bytes:
    encoders = _ENCODERS
    try:
        # Most commands emit one mutation; a comprehension would build a function object per
        # call, which costs about as much as encoding the mutation.
        if len(objs) == 1:
            o = objs[0]
            values = [encoders[type(o)](o)]
        else:
            values = []
            for o in objs:
                values.append(encoders[type(o)](o))
    except KeyError:
        values = [_top(o) for o in objs]
    try:
        packer = _local.packer
    except AttributeError:
        packer = _packer()
    try:
        return _HEADER_MANY + packer.pack(values)
    except Exception as exc:
        packer.reset()
        raise CodecError(f"cannot encode batch: {exc}") from exc


_COPY_LIMIT = 1 << 16   # bodies up to this size are sliced (a copy); larger ones are viewed


def _unpack(data: Any, kind: int) -> Any:
    if type(data) is not bytes:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise CodecError(f"expected bytes, got {type(data).__name__}")
        try:
            data = memoryview(data).cast("B")
        except (TypeError, ValueError) as exc:
            raise CodecError(f"unusable buffer: {exc}") from None
    if len(data) < 3:
        raise CodecError("frame too short")
    if data[0] != FORMAT_VERSION:
        raise CodecError(f"unsupported format version {data[0]} (this node speaks {FORMAT_VERSION})")
    if data[1] != kind:
        raise CodecError(f"frame kind {data[1]}, expected {kind} "
                         f"(use {'decode' if data[1] == _ONE else 'decode_many'})")
    body = data[2:] if len(data) <= _COPY_LIMIT else memoryview(data)[2:]
    try:
        return _unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:
        raise CodecError(f"malformed frame: {type(exc).__name__}: {exc}") from None


def _check(obj: Any, expect: type | tuple[type, ...] | None) -> Any:
    if expect is not None and not isinstance(obj, expect):
        raise CodecError(f"unexpected {type(obj).__name__}")
    return obj


def decode(data: bytes, expect: type | tuple[type, ...] | None = None) -> Any:
    """The object of an ``encode`` frame. ``expect``: refuse anything not an instance of it."""
    value = _unpack(data, _ONE)
    try:
        obj = _decode_any(value)
    except CodecError:
        raise
    except Exception as exc:  # a defect in a decoder or a constructor refusing a value
        raise CodecError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    return _check(obj, expect) if expect is not None else obj


def decode_many(data: bytes, expect: type | tuple[type, ...] | None = None) -> list:
    """The objects of an ``encode_many`` frame, in order."""
    if type(data) is bytes and len(data) > 2 and data[0] == FORMAT_VERSION and data[1] == _MANY:
        try:
            objs = _compiled_decode(memoryview(data)[2:])
        except Exception:   # noqa: BLE001 - not only compiled classes, or malformed (bad UTF-8
            pass            # raises UnicodeDecodeError): the general way decides and says why
        else:
            _share_empty_maps(objs)
            if expect is not None and not _compiled_expected(expect):
                for o in objs:
                    _check(o, expect)
            return objs
    return _decode_many_general(data, expect)


def _decode_many_general(data: bytes, expect: type | tuple[type, ...] | None) -> list:
    values = _unpack(data, _MANY)
    if type(values) is not list:
        raise CodecError(f"expected an array of objects, got {type(values).__name__}")
    try:
        objs = list(map(_decode_any, values))
    except CodecError:
        raise
    except Exception as exc:
        raise CodecError(f"malformed frame: {type(exc).__name__}: {exc}") from None
    if expect is not None:
        for o in objs:
            _check(o, expect)
    return objs
