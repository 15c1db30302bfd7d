"""MD5 digests as AWS computes them.

botocore does not check SQS digests (only the Java, .NET, Go, JavaScript and Kotlin SDKs do), so
there is no Python-side verifier to call. The proof here is twofold: digests pinned from other
implementations that were themselves checked against SQS or its SDKs, and an independent
transcription of the Java SDK's verifier (MessageMD5ChecksumInterceptor) that arbitrary
attributes must agree with.
"""

from __future__ import annotations

import hashlib
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage.commands import MessageAttributeValue as Attr
from storage.md5 import md5_hex, md5_of_attributes, md5_of_body


def java_sdk_digest(attrs: dict[str, Attr]) -> str:
    """MessageMD5ChecksumInterceptor.calculateMessageAttributesMd5, line by line."""
    out = io.BytesIO()

    def length_and_bytes(raw: bytes) -> None:
        out.write(len(raw).to_bytes(4, "big"))
        out.write(raw)

    # Collections.sort on Java strings: UTF-16 code unit order.
    for name in sorted(attrs, key=lambda n: n.encode("utf-16-be")):
        value = attrs[name]
        length_and_bytes(name.encode("utf-8"))
        length_and_bytes(value.data_type.encode("utf-8"))
        if value.string_value is not None:
            out.write(bytes([1]))
            length_and_bytes(value.string_value.encode("utf-8"))
        elif value.binary_value is not None:
            out.write(bytes([2]))
            length_and_bytes(value.binary_value)
    return hashlib.md5(out.getvalue()).hexdigest()


# --- bodies ---------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "body, digest",
    [
        ("derp", "58fd9edd83341c29f1aebba81c31e257"),  # moto's SendMessage tests
        ("This is a test message", "fafb00f5732ab283681e124bf8747ed1"),
        ("bar", "37b51d194a7513e45b56f6524f2d51f2"),  # AWS CLI output, elasticmq#373
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
    ],
)
def test_body_digest_vectors(body, digest):
    assert md5_of_body(body) == digest


def test_body_digest_is_of_utf8():
    body = "Héllo!😀 ü"
    assert md5_of_body(body) == hashlib.md5(body.encode("utf-8")).hexdigest()


# --- attributes: pinned vectors --------------------------------------------------------------

def number(v: str, t: str = "Number") -> Attr:
    return Attr(t, string_value=v)


def string(v: str, t: str = "String") -> Attr:
    return Attr(t, string_value=v)


def binary(v: bytes, t: str = "Binary") -> Attr:
    return Attr(t, binary_value=v)


VECTORS = [
    # moto's SQS tests, which pin what AWS returns for these attributes.
    ({"timestamp": number("1493147359900")}, "235c5c510d26fb653d073faed50ae77c"),
    ({"timestamp": number("1493147359901")}, "994258b45346a2cc3f9cbb611aa7af30"),
    ({"SOME_Valid.attribute-Name": number("1493147359900")}, "36655e7e9d7c0e8479fa3f3f42247ae7"),
    ({"timestamp": number("1493147359900", "Number.java.lang.Long")},
     "2e2e4876d8e0bd6b8c2c8f556831c349"),
    ({"timestamp": number("1493147359901", "Number.java.lang.Long")},
     "cfa7c73063c6e2dbf9be34232a1978cf"),
    ({"somevalue": string("somevalue", "String.custom")}, "9e05cca738e70ff6c6041e82d5e77ef1"),
    # moto: several attributes, a binary one and non-ASCII names and values, out of order.
    (
        {
            "ccc": string("testjunk"),
            "aaa": binary(b"\x02\x03\x04"),
            "zzz": number("0230.01"),
            "öther_encodings": string("T\xfcst"),
        },
        "8ae21a7957029ef04146b42aeaa18a22",
    ),
    # The npm package aws-md5-of-message-attributes' documented examples.
    ({"attribName1": string("attribValue 1")}, "19e27d4e946b072f3f58da80d94fd778"),
    ({"customNumberTypeAttrib": number("4563442423554324324264524243.32543234", "Number.float")},
     "9fe1b90bbd9965bdf77bac517c7d2495"),
    ({"binaryAttribute": binary(b"Hello binary world!")}, "31a92b15d92f8db860eda32aceb656c3"),
    (
        {
            "attribName1": string("attribValue 1"),
            "customNumberTypeAttrib": number(
                "4563442423554324324264524243.32543234", "Number.float"),
            "binaryAttribute": binary(b"Hello binary world!"),
        },
        "c932db14a896c663f83c260297d594ff",
    ),
    # ElasticMQ's answer in elasticmq#373 (an empty String value, which AWS itself refuses).
    ({"piyo": string("")}, "4166cc16b73099be3abe8e2b0f544c99"),
]


@pytest.mark.parametrize("attrs, digest", VECTORS)
def test_attribute_digest_vectors(attrs, digest):
    assert md5_of_attributes(attrs) == digest
    assert java_sdk_digest(attrs) == digest  # the transcription itself is right


@pytest.mark.parametrize("attrs", [None, {}])
def test_no_attributes_no_digest(attrs):
    assert md5_of_attributes(attrs) is None


def test_system_attribute_digest():
    trace = {"AWSTraceHeader": string("Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1")}
    assert md5_of_attributes(trace) == java_sdk_digest(trace)


def test_digest_does_not_depend_on_insertion_order():
    a = {"b": string("1"), "a": number("2"), "c": binary(b"3")}
    b = dict(reversed(list(a.items())))
    assert md5_of_attributes(a) == md5_of_attributes(b)


def test_transport_byte_separates_string_from_binary():
    # Same name, type text and payload bytes: only the transport byte differs.
    as_string = md5_of_attributes({"a": Attr("X", string_value="v")})
    as_binary = md5_of_attributes({"a": Attr("X", binary_value=b"v")})
    assert as_string != as_binary
    encoded = b"\x00\x00\x00\x01a" + b"\x00\x00\x00\x01X"
    assert as_string == hashlib.md5(encoded + b"\x01\x00\x00\x00\x01v").hexdigest()
    assert as_binary == hashlib.md5(encoded + b"\x02\x00\x00\x00\x01v").hexdigest()


@pytest.mark.parametrize("data_type", ["Binary.gif", "Binary"])
def test_custom_binary_types_use_the_binary_transport(data_type):
    attrs = {"img": binary(b"\x00\xff", data_type)}
    raw_type = data_type.encode()
    expected = (b"\x00\x00\x00\x03img" + len(raw_type).to_bytes(4, "big") + raw_type
                + b"\x02\x00\x00\x00\x02\x00\xff")
    assert md5_of_attributes(attrs) == hashlib.md5(expected).hexdigest()


def test_names_sort_as_utf16_like_the_java_verifier():
    # U+FF21 sorts after U+1F600 in UTF-16 (0xFF21 > 0xD83D) but before it by code point.
    attrs = {"\uff21": string("x"), "\U0001f600": string("y")}
    assert md5_of_attributes(attrs) == java_sdk_digest(attrs)
    by_code_point = b"".join(
        len(n.encode()).to_bytes(4, "big") + n.encode() + b"\x00\x00\x00\x06String"
        + b"\x01\x00\x00\x00\x01" + v.encode()
        for n, v in (("\uff21", "x"), ("\U0001f600", "y"))
    )
    assert md5_of_attributes(attrs) != hashlib.md5(by_code_point).hexdigest()


def test_binary_value_accepts_bytearray():
    assert md5_of_attributes({"b": binary(bytearray(b"xyz"))}) == md5_of_attributes(
        {"b": binary(b"xyz")})


# --- attributes: property --------------------------------------------------------------------

_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_labels = st.one_of(st.just(""), _text.filter(bool).map(lambda s: "." + s))


@st.composite
def attribute(draw):
    base = draw(st.sampled_from(["String", "Number", "Binary"]))
    data_type = base + draw(_labels)
    if base == "Binary":
        return Attr(data_type, binary_value=draw(st.binary(max_size=40)))
    return Attr(data_type, string_value=draw(_text))


@settings(max_examples=300)
@given(st.dictionaries(_text, attribute(), min_size=1, max_size=12))
def test_agrees_with_the_java_sdk_verifier(attrs):
    assert md5_of_attributes(attrs) == java_sdk_digest(attrs)


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 70_000])
def test_md5_hex_agrees_with_hashlib_on_both_sides_of_the_small_threshold(size):
    data = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
    assert md5_hex(data) == hashlib.md5(data).hexdigest()
