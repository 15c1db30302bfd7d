"""Validation raises the SqsError SQS answers with: code, shape and message."""

from __future__ import annotations

import sys

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from storage import errors
from storage.commands import MessageAttributeValue as Attr
from storage.limits import RELAXED, STRICT
from storage.validation import (
    ALLOWED_CHARACTERS,
    check_batch_ids,
    check_body,
    check_fifo_token,
    check_int_range,
    check_message_attributes,
)


def raises(kind: errors.ErrorKind, message: str | None = None):
    """Context manager asserting an SqsError of ``kind`` (and, if given, exact ``message``)."""

    class _Check:
        def __enter__(self):
            self._ctx = pytest.raises(errors.SqsError)
            self.info = self._ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            suppressed = self._ctx.__exit__(*exc)
            err = self.info.value
            assert err.kind is kind, (err.kind, kind)
            assert err.code == kind.query_code
            if message is not None:
                assert err.message == message
                assert str(err) == message
            return suppressed

    return _Check()


def allowed(cp: int) -> bool:
    return (
        cp in (0x9, 0xA, 0xD)
        or 0x20 <= cp <= 0xD7FF
        or 0xE000 <= cp <= 0xFFFD
        or 0x10000 <= cp <= 0x10FFFF
    )


def body_error(char: str) -> str:
    return (
        f"Invalid binary character '{char}' was found in the message body, the set of allowed "
        "characters is #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]."
    )


# --- check_body -----------------------------------------------------------------------------

@pytest.mark.parametrize("body", [None, ""])
def test_body_missing(body):
    with raises(errors.MISSING_PARAMETER, "The request must contain the parameter MessageBody."):
        check_body(body)


def test_body_error_code_is_the_legacy_one():
    with raises(errors.MISSING_PARAMETER) as info:
        check_body("")
    assert info.value.code == "MissingParameter"
    assert info.value.status == 400


@pytest.mark.parametrize(
    "body, size",
    [
        ("a", 1),
        ("hello\tworld\r\n", 13),
        ("\x7f", 1),
        ("é", 2),
        ("\ud7ff", 3),
        ("\ue000\ufffd", 6),
        ("😀", 4),
        ("\U0010ffff", 4),
        ('{"json": [1, 2.5, "ü"]}', 24),
    ],
)
def test_body_returns_utf8_size(body, size):
    assert check_body(body) == size == len(body.encode("utf-8"))


@pytest.mark.parametrize(
    "body, shown",
    [
        ("\x01", "#x1"),
        ("ok\x00", "#x0"),
        ("\x08", "#x8"),
        ("\x0b", "#xB"),
        ("\x0c", "#xC"),
        ("\x1f", "#x1F"),
        ("é\x1b", "#x1B"),
        ("\ufffe", "#xFFFE"),
        ("😀\uffff", "#xFFFF"),
        ("\ud800", "#xD800"),  # lone surrogates, as a lenient decode leaves them
        ("a\udfff", "#xDFFF"),
        ("\ud83d\ude00", "#xD83D"),  # a surrogate *pair* in a str is still two lone halves
    ],
)
def test_body_invalid_character(body, shown):
    with raises(errors.INVALID_MESSAGE_CONTENTS, body_error(shown)) as info:
        check_body(body)
    assert info.value.code == "InvalidMessageContents"


def test_body_error_names_the_first_offender():
    with raises(errors.INVALID_MESSAGE_CONTENTS, body_error("#x2")):
        check_body("abc\x02def\x01")


def test_allowed_characters_text_is_aws_spelling():
    assert ALLOWED_CHARACTERS == (
        "#x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]"
    )


@settings(max_examples=500)
@given(st.integers(0, 0x10FFFF))
@example(0x8)
@example(0x9)
@example(0x1F)
@example(0x20)
@example(0xD7FF)
@example(0xD800)
@example(0xDFFF)
@example(0xE000)
@example(0xFFFD)
@example(0xFFFE)
@example(0xFFFF)
@example(0x10000)
@example(0x10FFFF)
def test_body_accepts_exactly_the_allowed_code_points(cp):
    body = "x" + chr(cp) + "é"  # non-ASCII context too, to go down both scanning paths
    for text in (body, chr(cp)):
        if allowed(cp):
            assert check_body(text) == len(text.encode("utf-8"))
        else:
            with raises(errors.INVALID_MESSAGE_CONTENTS, body_error(f"#x{cp:X}")):
                check_body(text)


@settings(max_examples=300)
@given(st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
               min_size=1, max_size=50))
def test_body_accepts_exactly_texts_of_allowed_characters(text):
    if all(allowed(ord(c)) for c in text):
        assert check_body(text) == len(text.encode("utf-8"))
    else:
        first = next(c for c in text if not allowed(ord(c)))
        with raises(errors.INVALID_MESSAGE_CONTENTS, body_error(f"#x{ord(first):X}")):
            check_body(text)


@pytest.mark.parametrize("unit", ["a", "é", "😀", '{"k": "v"}, '])
def test_a_mebibyte_body_is_checked_without_a_python_loop_per_character(unit):
    # Speed belongs in `make bench`; what a unit test can pin down is the structure: the number
    # of Python lines executed must not grow with the body (a per-character loop runs millions).
    body = (unit * (1 << 20))[: 1 << 20]
    lines = 0

    def trace(frame, event, arg):
        nonlocal lines
        if event == "line":
            lines += 1
        return trace

    sys.settrace(trace)
    try:
        check_body(body)
    finally:
        sys.settrace(None)
    assert lines < 1_000, f"{lines} Python lines for one 1 MiB body"
    with raises(errors.INVALID_MESSAGE_CONTENTS, body_error("#x0")):
        check_body(body + "\x00")


# --- check_message_attributes: accepted --------------------------------------------------------

def s(v: str | None, t: str = "String", **kw) -> Attr:
    return Attr(t, string_value=v, **kw)


def b(v: bytes | None, t: str = "Binary", **kw) -> Attr:
    return Attr(t, binary_value=v, **kw)


@pytest.mark.parametrize("attrs", [None, {}])
def test_no_attributes_count_nothing(attrs):
    assert check_message_attributes(attrs, STRICT) == 0


def test_size_counts_name_type_and_value_bytes():
    attrs = {
        "name": s("vålue"),                    # 4 + 6 + 6
        "n.1": s("-12.5e3", "Number.float"),   # 3 + 12 + 7
        "bin_": b(b"\x00\x01\x02"),             # 4 + 6 + 3
        "x": s("ok", "String.ünï"),            # 1 + 12 + 2
    }
    assert check_message_attributes(attrs, STRICT) == 16 + 22 + 13 + 15


@pytest.mark.parametrize(
    "name",
    ["a", "A" * 256, "a-b_c.d", "my.attr", "0", "aws", "AWS_x", "amazon-x", "Amazonx.y",
     "awsx.y", "x.aws", "x.AWS.y"],
)
def test_valid_names(name):
    assert check_message_attributes({name: s("v")}, STRICT) == len(name) + 6 + 1


@pytest.mark.parametrize(
    "data_type",
    ["String", "Number", "Binary", "String.x", "Number.java.lang.Long", "Binary.gif",
     "String.ü ñ", "Number." + "L" * 249],
)
def test_valid_data_types(data_type):
    value = b(b"x", data_type) if data_type.startswith("Binary") else s("1", data_type)
    check_message_attributes({"a": value}, STRICT)


@pytest.mark.parametrize(
    "value",
    ["0", "-0", "+7", "1.5", ".5", "5.", "1e5", "1E+5", "2.5e-10", "00012", "0.000",
     "1" * 38, "1" * 38 + "0" * 10, "0.000" + "9" * 38, "1e126", "1.0E126", "10e125",
     "-1e128", "-0.1e129", "1e-1000", "1e-99999999999999", "0e99999999999"],
)
def test_valid_numbers(value):
    check_message_attributes({"n": s(value, "Number")}, STRICT)


def test_ten_attributes_allowed_and_relaxed_allows_more():
    ten = {f"a{i}": s("v") for i in range(10)}
    check_message_attributes(ten, STRICT)
    many = {f"a{i}": s("v") for i in range(100)}
    check_message_attributes(many, RELAXED)


# --- check_message_attributes: rejected --------------------------------------------------------

def invalid(attrs, message: str, limits=STRICT, **kw):
    with raises(errors.INVALID_PARAMETER_VALUE, message) as info:
        check_message_attributes(attrs, limits, **kw)
    assert info.value.code == "InvalidParameterValue"


def test_too_many_attributes():
    eleven = {f"a{i}": s("v") for i in range(11)}
    invalid(eleven, "Number of message attributes [11] exceeds the allowed maximum [10].")
    invalid({f"a{i}": s("v") for i in range(101)},
            "Number of message attributes [101] exceeds the allowed maximum [100].", RELAXED)


def test_count_is_checked_before_contents():
    attrs = {f"a{i}": s("") for i in range(11)}
    invalid(attrs, "Number of message attributes [11] exceeds the allowed maximum [10].")


def test_empty_name():
    invalid({"": s("v")}, "The request must contain non-empty message attribute name.")


def test_name_too_long():
    invalid({"L" * 257: s("v")}, "Message (user) attribute names must be shorter than 256 Bytes")


NAME_CHARS = ("Message (user) attributes name can only contain upper and lower score characters, "
              "digits, periods, hyphens and underscores. ")
RESERVED = ("You can't use message attribute names beginning with 'AWS.' or 'Amazon.'. These "
            "strings are reserved for internal use. Additionally, they cannot start or end with "
            "'.'.")


@pytest.mark.parametrize("name", ["a b", "a!", 'a"', "a§", "a(", "a?", "a/b", "a\n", "a:b"])
def test_name_bad_characters(name):
    invalid({name: s("v")}, NAME_CHARS)


@pytest.mark.parametrize("name", ["attr.1øßä", "ä", "名前", "Ωmega-2_x"])
def test_name_letters_of_any_script(name):
    # AWS accepts "attr.1øßä": LocalStack's AWS-validated test_send_message_with_invalid_string_attributes.
    assert check_message_attributes({name: s("v")}, STRICT) == len(name.encode()) + len("String") + 1


@pytest.mark.parametrize("name", ["AWS.x", "aws.x", "aWs.x", "Amazon.x", "AMAZON.x", "amazon.",
                                  ".x", "x.", ".", "aws."])
def test_name_reserved_or_dotted_at_the_ends(name):
    invalid({name: s("v")}, RESERVED)


@pytest.mark.parametrize("name", ["a..b", "a...b"])
def test_name_successive_periods(name):
    invalid({name: s("v")}, "Message (user) attribute name must not have successive '.' characters.")


def test_list_values_are_reserved():
    message = "Message attribute list values in SendMessage operation are not supported."
    invalid({"a": Attr("String", string_list_values=("x",))}, message)
    invalid({"a": Attr("Binary", binary_list_values=(b"x",))}, message)
    invalid({"a": Attr("String", string_value="x", string_list_values=("y",))}, message)


def test_empty_list_values_are_as_good_as_absent():
    check_message_attributes({"a": Attr("String", "x", None, (), ())}, STRICT)


@pytest.mark.parametrize("data_type", ["", None])
def test_missing_data_type(data_type):
    invalid({"HTTPStatus": Attr(data_type, string_value="200")},  # type: ignore[arg-type]
            "The message attribute 'HTTPStatus' must contain non-empty message attribute type.")


@pytest.mark.parametrize(
    "data_type",
    ["string", "STRING", "Strings", "Str", "Number.", "Integer", "Binary.", "Stringx.y",
     ".String", " String", "String.a\x01"],
)
def test_bad_data_type(data_type):
    invalid({"my-attribute": s("v", data_type)},
            "The type of message (user) attribute 'my-attribute' is invalid. You must use only "
            "the following supported type prefixes: Binary, Number, String.")


def test_data_type_too_long():
    invalid({"a": s("1", "Number." + "L" * 250)},
            "Message (user) attribute types must be shorter than 256 Bytes")


@pytest.mark.parametrize(
    "value, data_type",
    [(s(""), "String"), (s(None), "String"), (s("", "Number"), "Number"),
     (s(None, "String.custom"), "String.custom"), (b(b""), "Binary"), (b(None), "Binary"),
     (b(None, "Binary.gif"), "Binary.gif"),
     # a value in the field the type does not use is no value at all
     (Attr("String", binary_value=b"x"), "String"), (Attr("Binary", string_value="x"), "Binary")],
)
def test_empty_or_missing_value(value, data_type):
    invalid({"ErrorDetails": value},
            f"Message (user) attribute 'ErrorDetails' must contain a non-empty value of type "
            f"'{data_type}'.")


@pytest.mark.parametrize("value", [Attr("String", "x", b"y"), Attr("Binary", "x", b"y")])
def test_two_values(value):
    invalid({"a": value}, "Message (user) attribute 'a' must have a single value.")


@pytest.mark.parametrize("value", ["Hello", "1,5", "1e", "e5", "--1", "+-1", "0x10", "1_000",
                                   " 1", "1 ", "\u0663", "NaN", "Infinity", "1.2.3", ".", "-"])
def test_number_that_is_not_one(value):
    invalid({"Age": s(value, "Number")},
            "Can't cast the value of message (user) attribute 'Age' to a number.")


@pytest.mark.parametrize("value", ["1" * 39, "1" + "0" * 37 + ".1", "-0.0" + "12345" * 8])
def test_number_too_precise(value):
    invalid({"n": s(value, "Number.x")},
            f"Value {value} for parameter MessageAttributes.n.StringValue is invalid. Reason: "
            "Number values can have up to 38 digits of precision.")


@pytest.mark.parametrize("value", ["1e127", "1.1e126", "1" + "0" * 127, "10000000001e116",
                                   "-1e129", "-1.01e128", ".1e+00000001234567", "1e99999999999"])
def test_number_out_of_range(value):
    invalid({"n": s(value, "Number")},
            f"Value {value} for parameter MessageAttributes.n.StringValue is invalid. Reason: "
            "Number values must be between -10^128 and 10^126.")


@pytest.mark.parametrize("value, shown", [("Invalid-\x08", "#x8"), ("x\x0b", "#xB"),
                                          ("\ufffe", "#xFFFE"), ("\ud800", "#xD800")])
def test_string_value_invalid_character(value, shown):
    invalid({"attr1": s(value)},
            f"Invalid binary character '{shown}' was found in the value of message (user) "
            f"attribute 'attr1', the set of allowed characters is {ALLOWED_CHARACTERS}.")


def test_binary_values_may_hold_any_bytes():
    assert check_message_attributes({"b": b(bytes(range(256)))}, STRICT) == 1 + 6 + 256


def test_first_bad_attribute_in_request_order_is_reported():
    attrs = {"zzz": s(""), "aaa": s("x", "Bogus")}
    invalid(attrs, "Message (user) attribute 'zzz' must contain a non-empty value of type "
                   "'String'.")


# --- system attributes -------------------------------------------------------------------------

TRACE = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"


def test_trace_header_allowed_and_counts_nothing():
    assert check_message_attributes({"AWSTraceHeader": s(TRACE)}, STRICT, system=True) == 0
    assert check_message_attributes(None, STRICT, system=True) == 0


@pytest.mark.parametrize("name", ["Foo", "awstraceheader", "AWSTraceHeaderX", "SenderId"])
def test_other_system_attribute_names(name):
    invalid({name: s("x")},
            f"Value {name} for parameter MessageSystemAttributes is invalid. Reason: The only "
            "supported message system attribute is AWSTraceHeader.", system=True)


@pytest.mark.parametrize("data_type", ["Number", "Binary", "String.x"])
def test_trace_header_must_be_a_string(data_type):
    value = b(b"x", data_type) if data_type == "Binary" else s("1", data_type)
    invalid({"AWSTraceHeader": value},
            f"Value {data_type} for parameter MessageSystemAttributes.AWSTraceHeader.DataType is "
            "invalid. Reason: The type of AWSTraceHeader must be String.", system=True)


def test_trace_header_empty():
    invalid({"AWSTraceHeader": s("")},
            "Message (system) attribute 'AWSTraceHeader' must contain a non-empty value of type "
            "'String'.", system=True)


def test_trace_header_missing_type_and_list_values():
    invalid({"AWSTraceHeader": Attr("", string_value="x")},
            "The message attribute 'AWSTraceHeader' must contain non-empty message attribute "
            "type.", system=True)
    invalid({"AWSTraceHeader": Attr("String", string_list_values=("x",))},
            "Message attribute list values in SendMessage operation are not supported.",
            system=True)


def test_trace_header_bad_character():
    invalid({"AWSTraceHeader": s("Root=\x00")},
            "Invalid binary character '#x0' was found in the value of message (system) attribute "
            f"'AWSTraceHeader', the set of allowed characters is {ALLOWED_CHARACTERS}.",
            system=True)


def test_system_attributes_skip_the_user_count_limit():
    # Only one name is valid, so the name check, not the count, is what a crowd runs into.
    crowd = {"AWSTraceHeader": s(TRACE), **{f"a{i}": s("v") for i in range(11)}}
    with raises(errors.INVALID_PARAMETER_VALUE) as info:
        check_message_attributes(crowd, STRICT, system=True)
    assert "only supported message system attribute" in info.value.message


# --- check_batch_ids ---------------------------------------------------------------------------

BAD_ID = ("A batch entry id can only contain alphanumeric characters, hyphens and underscores. "
          "It can be at most 80 letters long.")


def test_batch_ids_ok():
    check_batch_ids(["a", "B-1", "c_2", "x" * 80], STRICT)
    check_batch_ids([str(i) for i in range(1000)], RELAXED)


@pytest.mark.parametrize("entry_name", ["SendMessageBatchRequestEntry",
                                        "DeleteMessageBatchRequestEntry",
                                        "ChangeMessageVisibilityBatchRequestEntry"])
def test_batch_empty(entry_name):
    with raises(errors.EMPTY_BATCH,
                f"There should be at least one {entry_name} in the request.") as info:
        check_batch_ids([], STRICT, entry_name)
    assert info.value.code == "AWS.SimpleQueueService.EmptyBatchRequest"


def test_batch_empty_default_entry_name():
    with raises(errors.EMPTY_BATCH,
                "There should be at least one SendMessageBatchRequestEntry in the request."):
        check_batch_ids((), STRICT)


def test_batch_too_many():
    with raises(errors.TOO_MANY_ENTRIES,
                "Maximum number of entries per request are 10. You have sent 11.") as info:
        check_batch_ids([str(i) for i in range(11)], STRICT)
    assert info.value.code == "AWS.SimpleQueueService.TooManyEntriesInBatchRequest"
    with raises(errors.TOO_MANY_ENTRIES,
                "Maximum number of entries per request are 1000. You have sent 1001."):
        check_batch_ids([str(i) for i in range(1001)], RELAXED)


@pytest.mark.parametrize("bad", [None, "", "x" * 81, "a b", "a.b", "é", "a/b", "a\n", "a\nb", "\n", 7])
def test_batch_bad_id(bad):
    with raises(errors.INVALID_BATCH_ENTRY_ID, BAD_ID) as info:
        check_batch_ids(["ok", bad], STRICT)  # type: ignore[list-item]
    assert info.value.code == "AWS.SimpleQueueService.InvalidBatchEntryId"


def test_batch_repeated_id():
    with raises(errors.BATCH_IDS_NOT_DISTINCT, "Id b repeated.") as info:
        check_batch_ids(["a", "b", "c", "b", "a"], STRICT)
    assert info.value.code == "AWS.SimpleQueueService.BatchEntryIdsNotDistinct"


def test_batch_check_order():
    # too many wins over bad and repeated ids; a bad id wins over a repeated one
    with raises(errors.TOO_MANY_ENTRIES):
        check_batch_ids(["a"] * 10 + [""], STRICT)
    with raises(errors.INVALID_BATCH_ENTRY_ID):
        check_batch_ids(["a", "a", "b c"], STRICT)


# --- check_fifo_token --------------------------------------------------------------------------

PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"


@pytest.mark.parametrize("value", ["a", "A1", PUNCTUATION, "x" * 128, "/_next/data/x.json"])
def test_fifo_token_ok(value):
    for param in ("MessageGroupId", "MessageDeduplicationId", "ReceiveRequestAttemptId"):
        check_fifo_token(param, value)


@pytest.mark.parametrize("value", ["", "x" * 129, "a b", "é", "a\t", "\x08", "😀", None])
def test_fifo_token_rejected(value):
    with raises(errors.INVALID_PARAMETER_VALUE,
                f"Value {value} for parameter MessageGroupId is invalid. Reason: MessageGroupId "
                "can only include alphanumeric and punctuation characters. 1 to 128 in length."):
        check_fifo_token("MessageGroupId", value)  # type: ignore[arg-type]


@given(st.text(max_size=130))
def test_fifo_token_accepts_exactly_printable_ascii_without_space(value):
    ok = 1 <= len(value) <= 128 and all(c.isascii() and c.isalnum() or c in PUNCTUATION
                                        for c in value)
    if ok:
        check_fifo_token("MessageDeduplicationId", value)
    else:
        with raises(errors.INVALID_PARAMETER_VALUE):
            check_fifo_token("MessageDeduplicationId", value)


# --- check_int_range ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, 1, 5, 10])
def test_int_range_ok(value):
    check_int_range("MaxNumberOfMessages", value, 1, 10)


@pytest.mark.parametrize("value", [0, 11, -1, 10**30])
def test_int_range_out_of_range(value):
    with raises(errors.INVALID_PARAMETER_VALUE,
                f"Value {value} for parameter MaxNumberOfMessages is invalid. Reason: Must be "
                "between 1 and 10, if provided."):
        check_int_range("MaxNumberOfMessages", value, 1, 10)


@pytest.mark.parametrize("value", [True, False, 1.0, "5", b"5"])
def test_int_range_rejects_non_integers(value):
    with raises(errors.INVALID_PARAMETER_VALUE,
                f"Value {value} for parameter DelaySeconds is invalid. Reason: Must be between 0 "
                "and 900, if provided."):
        check_int_range("DelaySeconds", value, 0, 900)  # type: ignore[arg-type]


def test_int_range_custom_reason():
    with raises(errors.INVALID_PARAMETER_VALUE,
                "Value 43201 for parameter VisibilityTimeout is invalid. Reason: Total "
                "VisibilityTimeout for the message is beyond the limit [43200 seconds]."):
        check_int_range("VisibilityTimeout", 43201, 0, 43200,
                        "Total VisibilityTimeout for the message is beyond the limit "
                        "[43200 seconds]")
