"""Errors the protocol layer raises before a command reaches storage.

Storage's ``ErrorKind`` carries both names each protocol needs; these are the few that only the
wire can produce (the request could not even be read).
"""

from __future__ import annotations

from storage.errors import ErrorKind, SqsError

# What AWS's JSON front end answers for a body it cannot deserialize.
SERIALIZATION = ErrorKind("SerializationException", "SerializationException")
# Query protocol: the form itself is unreadable.
MALFORMED_QUERY_STRING = ErrorKind("MalformedQueryString", "MalformedQueryString")
INVALID_ADDRESS = ErrorKind("InvalidAddress", "InvalidAddress")
REQUEST_TOO_LARGE = ErrorKind("RequestEntityTooLarge", "RequestEntityTooLarge", 413)
METHOD_NOT_ALLOWED = ErrorKind("MethodNotAllowed", "MethodNotAllowed", 405)
UNSUPPORTED_MEDIA = ErrorKind("UnsupportedMediaType", "InvalidParameterValue", 415)
HEADERS_TOO_LARGE = ErrorKind("RequestHeaderFieldsTooLarge", "InvalidRequest", 431)
BAD_REQUEST = ErrorKind("InvalidRequest", "InvalidRequest")
# A Query request that names no action: AWS answers 404 with a bare <UnknownOperationException/>
# (LocalStack's AWS-validated test_get_without_query_returns_unknown_operation).
UNKNOWN_OPERATION = ErrorKind("UnknownOperationException", "UnknownOperationException", 404)


def serialization(message: str) -> SqsError:
    return SERIALIZATION(message)


def invalid_address(url: str) -> SqsError:
    return INVALID_ADDRESS(f"The address {url} is not valid for this endpoint.")
