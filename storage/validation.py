"""Checks of client input, raising the SqsError SQS itself would answer with.

Pure functions of their arguments: no clock, no state. Codes are SQS's; messages are AWS's own
wording where a capture of the real service was found, and otherwise the closest wording known.
Provenance of the wording:

* captured from AWS: the invalid-body-character message; "The request must contain non-empty
  message attribute name."; "The message attribute 'X' must contain non-empty message attribute
  type."; "The type of message (user) attribute 'X' is invalid. ..."; "Message (user) attribute
  'X' must contain a non-empty value of type 'String'."; "Can't cast the value of message (user)
  attribute 'X' to a number."; "Number of message attributes [11] exceeds the allowed maximum
  [10]."; the MessageGroupId reason; the "Must be between 1 and 10, if provided" reason.
* from LocalStack (which tests its SQS against AWS, though not these texts): the name-length,
  name-character, reserved-prefix and type-length messages, and the batch errors.
* from other reimplementations only: successive periods in a name; a value given in both
  StringValue and BinaryValue.
* no source found: the Number precision and range, bad characters in a String attribute, and the
  message-system-attribute name and type. These use the "Value X for parameter Y is invalid.
  Reason: Z." shape or mirror the body's message.

Content rules (allowed characters, attribute names and types) are the same under the strict and
relaxed limits; only counts take a Limits.
"""

from __future__ import annotations

import re
from typing import Mapping, Sequence

from storage.commands import MessageAttributeValue
from storage.errors import (
    BATCH_IDS_NOT_DISTINCT,
    EMPTY_BATCH,
    INVALID_BATCH_ENTRY_ID,
    INVALID_MESSAGE_CONTENTS,
    INVALID_PARAMETER_VALUE,
    TOO_MANY_ENTRIES,
    SqsError,
    invalid_parameter,
    missing_parameter,
)
from storage.limits import Limits

__all__ = [
    "ALLOWED_CHARACTERS",
    "check_body",
    "encoded_body",
    "check_message_attributes",
    "check_batch_ids",
    "check_fifo_token",
    "check_int_range",
]

# As AWS spells the set in its InvalidMessageContents message.
ALLOWED_CHARACTERS = "#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]"

# The complement of the allowed set; lone surrogates (U+D800..U+DFFF, which a str can hold after
# a lenient decode) fall outside every allowed range and so match too. Used to name the offending
# character once a text is known to be bad, and for short texts.
_find_invalid_char = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]").search

# bytes.translate() with this table changes exactly the forbidden C0 controls (to a space), so
# a text is free of them iff translating leaves it equal. In UTF-8 such a control is always a
# single byte below 0x20, never part of a multi-byte sequence. (Deleting the allowed bytes
# instead, with translate's deletechars, rebuilds a 256-entry table on every call: for a short
# body that cost more than the scan.)
_C0_CONTROLS = bytes(b for b in range(0x20) if b not in (0x09, 0x0A, 0x0D))
_FLAG_C0 = bytes.maketrans(_C0_CONTROLS, b" " * len(_C0_CONTROLS))
_U_FFFx = b"\xef\xbf"  # UTF-8 prefix of U+FFC0..U+FFFF, among them U+FFFE and U+FFFF

# Letters and digits of any script (AWS accepts "attr.1øßä": LocalStack's AWS-validated
# test_send_message_with_invalid_string_attributes), underscore, hyphen and period.
_ATTRIBUTE_NAME = re.compile(r"[\w.\-]+")
# All of a batch's ids at once, joined by newlines (which no valid id contains): one match
# instead of one per id, each of which cost more than a whole batch entry's other checks.
_BATCH_IDS = re.compile(r"[A-Za-z0-9_\-]{1,80}(?:\n[A-Za-z0-9_\-]{1,80})*")
# Alphanumerics and the 32 ASCII punctuation characters.
_FIFO_TOKEN = re.compile(r"""[A-Za-z0-9!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]{1,128}""")
# Decimal numerals as Java's BigDecimal reads them ("+1", ".5", "5.", "1E+5"); ASCII digits only,
# which \d would not guarantee.
_NUMBER = re.compile(r"([+-]?)(?:([0-9]+)(?:\.([0-9]*))?|\.([0-9]+))(?:[eE]([+-]?[0-9]+))?")

_MAX_ATTRIBUTE_NAME = 256
_MAX_DATA_TYPE = 256
_MAX_NUMBER_DIGITS = 38
# Number values lie in -10^128..10^126, as powers of ten of the leading digit.
_NUMBER_MAX_POWER = 126
_NUMBER_MIN_POWER = 128
_BASE_TYPES = frozenset(("String", "Number", "Binary"))
_RESERVED_PREFIXES = ("aws.", "amazon.")
_TRACE_HEADER = "AWSTraceHeader"


def _utf8_len(s: str) -> int:
    # isascii() is O(1) on CPython; it spares the encode (a copy) for the common case.
    return len(s) if s.isascii() else len(s.encode("utf-8"))


def _valid_utf8(text: str) -> bytes | None:
    """The UTF-8 encoding of a text made only of allowed characters, or None.

    Bodies reach megabytes, so this is a few C-level passes over the bytes (a regex scan of the
    str is several times slower): strict UTF-8 encoding refuses lone surrogates, translate()
    finds the C0 controls, and a substring search finds U+FFFE and U+FFFF.
    """
    try:
        raw = text.encode()
    except UnicodeEncodeError:
        return None
    if raw.translate(_FLAG_C0) != raw:
        return None
    if not text.isascii() and _U_FFFx in raw and (b"\xef\xbf\xbe" in raw or b"\xef\xbf\xbf" in raw):
        return None
    return raw


def _valid_utf8_len(text: str) -> int:
    """UTF-8 size of a text made only of allowed characters, or -1."""
    raw = _valid_utf8(text)
    return -1 if raw is None else len(raw)


def _first_invalid_char(text: str) -> str:
    bad = _find_invalid_char(text)
    return f"#x{ord(bad.group()):X}" if bad is not None else "?"


# --- message body ---------------------------------------------------------------------------

def encoded_body(body: str | None) -> bytes:
    """Validate a message body and return its UTF-8 encoding (its size, and what MD5 digests)."""
    if not body:
        raise missing_parameter("MessageBody")
    raw = _valid_utf8(body)
    if raw is None:
        raise INVALID_MESSAGE_CONTENTS(
            f"Invalid binary character '{_first_invalid_char(body)}' was found in the message "
            f"body, the set of allowed characters is {ALLOWED_CHARACTERS}."
        )
    return raw


def check_body(body: str | None) -> int:
    """Validate a message body and return its size in UTF-8 bytes."""
    return len(encoded_body(body))


# --- message attributes ---------------------------------------------------------------------

def check_message_attributes(
    attrs: Mapping[str, MessageAttributeValue] | None,
    limits: Limits,
    *,
    system: bool = False,
) -> int:
    """Validate message attributes and return the bytes they add to the message's size.

    User attributes count name, data type and value toward the message size; system attributes
    (``system=True``, where only AWSTraceHeader of type String is allowed) count nothing, as AWS
    documents. Attributes are checked in the order the request gave them, so the error reported
    is the first offending attribute's.
    """
    if not attrs:
        return 0
    if system:
        for name, value in attrs.items():
            _check_system_attribute(name, value)
        return 0
    count = len(attrs)
    if count > limits.max_message_attributes:
        raise INVALID_PARAMETER_VALUE(
            f"Number of message attributes [{count}] exceeds the allowed maximum "
            f"[{limits.max_message_attributes}]."
        )
    size = 0
    for name, value in attrs.items():
        _check_attribute_name(name)
        size += _check_attribute_value(name, value, "user")
    return size


def _check_attribute_name(name: str) -> None:
    if not name:
        raise INVALID_PARAMETER_VALUE(
            "The request must contain non-empty message attribute name."
        )
    if len(name) > _MAX_ATTRIBUTE_NAME:
        # AWS documents names of "up to 256 characters", and its message says "shorter than 256";
        # the documented bound is the one enforced.
        raise INVALID_PARAMETER_VALUE(
            "Message (user) attribute names must be shorter than 256 Bytes"
        )
    if _ATTRIBUTE_NAME.fullmatch(name) is None:
        # Sic, including the trailing space.
        raise INVALID_PARAMETER_VALUE(
            "Message (user) attributes name can only contain upper and lower score characters, "
            "digits, periods, hyphens and underscores. "
        )
    if name[0] == "." or name[-1] == "." or name.lower().startswith(_RESERVED_PREFIXES):
        raise INVALID_PARAMETER_VALUE(
            "You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. "
            "These strings are reserved for internal use. "
            "Additionally, they cannot start or end with '.'."
        )
    if ".." in name:
        raise INVALID_PARAMETER_VALUE(
            "Message (user) attribute name must not have successive '.' characters."
        )


def _check_list_values(value: MessageAttributeValue) -> None:
    if value.string_list_values or value.binary_list_values:
        raise INVALID_PARAMETER_VALUE(
            "Message attribute list values in SendMessage operation are not supported."
        )


def _check_attribute_value(name: str, value: MessageAttributeValue, kind: str) -> int:
    """Check one attribute's type and value; return name + type + value bytes."""
    _check_list_values(value)
    data_type = value.data_type
    if not data_type:
        raise INVALID_PARAMETER_VALUE(
            f"The message attribute '{name}' must contain non-empty message attribute type."
        )
    base, dot, label = data_type.partition(".")
    if (
        base not in _BASE_TYPES
        or (dot and not label)
        or (label and _find_invalid_char(label) is not None)
    ):
        # A custom label is free text under the same character rules as a body.
        raise INVALID_PARAMETER_VALUE(
            f"The type of message ({kind}) attribute '{name}' is invalid. You must use only the "
            "following supported type prefixes: Binary, Number, String."
        )
    if len(data_type) > _MAX_DATA_TYPE:
        raise INVALID_PARAMETER_VALUE(
            f"Message ({kind}) attribute types must be shorter than 256 Bytes"
        )

    if base == "Binary":
        binary = value.binary_value
        if not binary:
            raise _empty_value(name, data_type, kind)
        if value.string_value is not None:
            raise _not_single_value(name, kind)
        return _utf8_len(name) + _utf8_len(data_type) + len(binary)

    text = value.string_value
    if not text:
        raise _empty_value(name, data_type, kind)
    if value.binary_value is not None:
        raise _not_single_value(name, kind)
    size = _valid_utf8_len(text)
    if size < 0:
        raise INVALID_PARAMETER_VALUE(
            f"Invalid binary character '{_first_invalid_char(text)}' was found in the value of "
            f"message ({kind}) attribute '{name}', the set of allowed characters is "
            f"{ALLOWED_CHARACTERS}."
        )
    if base == "Number":
        _check_number(name, text, kind)
    return _utf8_len(name) + _utf8_len(data_type) + size


def _empty_value(name: str, data_type: str, kind: str) -> SqsError:
    return INVALID_PARAMETER_VALUE(
        f"Message ({kind}) attribute '{name}' must contain a non-empty value of type '{data_type}'."
    )


def _not_single_value(name: str, kind: str) -> SqsError:
    return INVALID_PARAMETER_VALUE(
        f"Message ({kind}) attribute '{name}' must have a single value."
    )


def _check_number(name: str, text: str, kind: str) -> None:
    match = _NUMBER.fullmatch(text)
    if match is None:
        raise INVALID_PARAMETER_VALUE(
            f"Can't cast the value of message ({kind}) attribute '{name}' to a number."
        )
    sign, whole, fraction, bare_fraction, exponent = match.groups()
    whole = whole or ""
    digits = whole + (fraction or bare_fraction or "")
    significant = digits.lstrip("0")
    if not significant:
        return  # zero, whatever its spelling
    leading_zeros = len(digits) - len(significant)
    significant = significant.rstrip("0")
    # Precision as DynamoDB counts it for the same 38-digit rule: leading and trailing zeros
    # are not significant.
    if len(significant) > _MAX_NUMBER_DIGITS:
        raise invalid_parameter(
            f"MessageAttributes.{name}.StringValue", text,
            f"Number values can have up to {_MAX_NUMBER_DIGITS} digits of precision",
        )
    # The range check is done on the decimal exponent rather than by building the number, so
    # that an exponent of any length costs nothing ("1e99999999999" must not allocate).
    limit = _NUMBER_MIN_POWER if sign == "-" else _NUMBER_MAX_POWER
    shift = 0
    if exponent is not None:
        exponent_digits = exponent.lstrip("+-").lstrip("0")
        if len(exponent_digits) <= 6:
            shift = int(exponent_digits or "0")
            if exponent[0] == "-":
                shift = -shift
        elif exponent[0] == "-":
            return  # vanishingly small, and there is no lower bound on magnitude
        else:
            shift = limit + len(digits) + 1  # certainly beyond the bound
    # Power of ten of the leading significant digit: the value lies in [10^p, 10^(p+1)).
    power = shift + len(whole) - 1 - leading_zeros
    if power > limit or (power == limit and significant != "1"):
        raise invalid_parameter(
            f"MessageAttributes.{name}.StringValue", text,
            "Number values must be between -10^128 and 10^126",
        )


def _check_system_attribute(name: str, value: MessageAttributeValue) -> None:
    if name != _TRACE_HEADER:
        raise invalid_parameter(
            "MessageSystemAttributes", name,
            f"The only supported message system attribute is {_TRACE_HEADER}",
        )
    _check_list_values(value)
    if not value.data_type:
        raise INVALID_PARAMETER_VALUE(
            f"The message attribute '{name}' must contain non-empty message attribute type."
        )
    if value.data_type != "String":
        raise invalid_parameter(
            f"MessageSystemAttributes.{name}.DataType", value.data_type,
            f"The type of {_TRACE_HEADER} must be String",
        )
    _check_attribute_value(name, value, "system")


# --- batches and other parameters -----------------------------------------------------------

def check_batch_ids(
    ids: Sequence[str | None],
    limits: Limits,
    entry_name: str = "SendMessageBatchRequestEntry",
) -> None:
    """Validate a batch request's entry ids: present, not too many, well-formed, distinct."""
    count = len(ids)
    if count == 0:
        raise EMPTY_BATCH(f"There should be at least one {entry_name} in the request.")
    if count > limits.max_batch_entries:
        raise TOO_MANY_ENTRIES(
            f"Maximum number of entries per request are {limits.max_batch_entries}. "
            f"You have sent {count}."
        )
    try:
        joined = "\n".join(ids)  # type: ignore[arg-type]
    except TypeError:  # an id that is not a str
        joined = None
    # Exactly count - 1 newlines: no id brought one of its own, so the parts are the ids.
    if joined is None or joined.count("\n") != count - 1 or _BATCH_IDS.fullmatch(joined) is None:
        raise INVALID_BATCH_ENTRY_ID(
            "A batch entry id can only contain alphanumeric characters, hyphens and "
            "underscores. It can be at most 80 letters long."
        )
    if len(set(ids)) != count:
        seen: set[str] = set()
        for entry_id in ids:
            if entry_id in seen:
                raise BATCH_IDS_NOT_DISTINCT(f"Id {entry_id} repeated.")
            seen.add(entry_id)  # type: ignore[arg-type]  # ids are str past the format check


def check_fifo_token(param_name: str, value: str) -> None:
    """Validate a MessageGroupId, MessageDeduplicationId or ReceiveRequestAttemptId."""
    if not isinstance(value, str) or _FIFO_TOKEN.fullmatch(value) is None:
        raise invalid_parameter(
            param_name, value,
            f"{param_name} can only include alphanumeric and punctuation characters. "
            "1 to 128 in length",
        )


def check_int_range(
    param: str, value: int | None, lo: int, hi: int, reason: str | None = None
) -> None:
    """Validate an optional integer parameter against an inclusive range; None passes.

    ``reason`` may name the bounds as ``{lo}`` and ``{hi}``: it is formatted only on failure, so
    that callers on hot paths do not build a message for every valid value.
    """
    if value is None or (type(value) is int and lo <= value <= hi):
        return
    if not isinstance(value, bool) and isinstance(value, int) and lo <= value <= hi:
        return  # an int subclass
    raise invalid_parameter(
        param, value, (reason or "Must be between {lo} and {hi}, if provided").format(lo=lo, hi=hi)
    )
