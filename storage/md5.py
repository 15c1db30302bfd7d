"""The MD5 digests SQS returns with every sent and received message, byte for byte as AWS's.

Clients check them: the AWS SDKs for Java, .NET, Go, JavaScript and Kotlin recompute the digests
of what they sent (or received) and fail the call on a mismatch, so any deviation here breaks
those clients outright. The attribute digest follows the SDKs' verifier (the Java SDK's
``MessageMD5ChecksumInterceptor`` is the reference): for each attribute, in order of name,

    len(name) name  len(data_type) data_type  transport  len(value) value

with every length a 4-byte big-endian count of the UTF-8 (or raw binary) bytes that follow, and
``transport`` one byte: 1 for a string value (String, Number and their custom ``.label``
types), 2 for a binary value. The same digest covers message system attributes
(``AWSTraceHeader``).

This is on the send and receive hot paths, hence the bound methods and constants at module level.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Mapping

from storage.commands import MessageAttributeValue

__all__ = ["md5_of_body", "md5_hex", "md5_of_attributes"]

_md5 = hashlib.md5
try:
    # CPython's built-in MD5, without OpenSSL: OpenSSL 3 fetches its algorithm on every
    # constructor call, which is twice the whole cost of a digest of a typical (small) body;
    # its faster block function only pays off beyond a few kilobytes.
    from _md5 import md5 as _small_md5
except ImportError:  # pragma: no cover - a build without the built-in hashes
    _small_md5 = _md5
_SMALL = 1024
_pack_len = struct.Struct(">I").pack

_STRING = b"\x01"
_BINARY = b"\x02"
# Reserved by SQS and rejected on send, but the SDK verifiers define their encoding, so a digest
# over them (should one ever be asked for) still agrees with the clients.
_STRING_LIST = b"\x03"
_BINARY_LIST = b"\x04"

# Length-prefixed encodings of the data types nearly every attribute uses.
_TYPE_FIELD = {t: _pack_len(len(t)) + t.encode() for t in ("String", "Number", "Binary")}


def _utf16_order(name: str) -> bytes:
    return name.encode("utf-16-be", "surrogatepass")


def md5_of_body(body: str) -> str:
    """Hex MD5 of the UTF-8 encoding of a message body."""
    return md5_hex(body.encode("utf-8"))


def md5_hex(data: bytes) -> str:
    """Hex MD5 of some bytes (a body already encoded), by whichever implementation is cheaper."""
    if len(data) < _SMALL:
        return _small_md5(data).hexdigest()
    return _md5(data, usedforsecurity=False).hexdigest()


def md5_of_attributes(attrs: Mapping[str, MessageAttributeValue] | None) -> str | None:
    """Hex MD5 of message (or message system) attributes; None when there are none.

    SQS omits MD5OfMessageAttributes entirely for a message without attributes, hence None
    rather than the digest of nothing.
    """
    if not attrs:
        return None
    names = sorted(attrs)
    # The Java and JavaScript verifiers sort by UTF-16 code unit, which differs from Python's
    # code-point order only when a name mixes astral and U+E000..U+FFFF characters. Valid names
    # are ASCII, so this re-sort is for digests of unvalidated input only.
    if not "".join(names).isascii():
        names.sort(key=_utf16_order)

    parts: list[bytes] = []
    append = parts.append
    type_field = _TYPE_FIELD.get
    for name in names:
        value = attrs[name]
        raw_name = name.encode("utf-8")
        append(_pack_len(len(raw_name)))
        append(raw_name)
        data_type = value.data_type
        field = type_field(data_type)
        if field is None:
            raw_type = data_type.encode("utf-8")
            field = _pack_len(len(raw_type)) + raw_type
        append(field)
        # Which value is present decides the transport byte, exactly as in the SDK verifiers;
        # for a validated attribute that is the one its data type calls for.
        if value.string_value is not None:
            raw = value.string_value.encode("utf-8")
            append(_STRING)
            append(_pack_len(len(raw)))
            append(raw)
        elif value.binary_value is not None:
            raw = bytes(value.binary_value)
            append(_BINARY)
            append(_pack_len(len(raw)))
            append(raw)
        elif value.string_list_values:
            append(_STRING_LIST)
            for item in value.string_list_values:
                raw = item.encode("utf-8")
                append(_pack_len(len(raw)))
                append(raw)
        elif value.binary_list_values:
            append(_BINARY_LIST)
            for item in value.binary_list_values:
                raw = bytes(item)
                append(_pack_len(len(raw)))
                append(raw)
    return _md5(b"".join(parts), usedforsecurity=False).hexdigest()
