"""The values that cross between the HTTP glue and the protocol layer."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from storage.commands import Namespace
from storage.records import FROZEN

# Immutable by contract. The dataclasses here enforce it only under ELASTICMQ_PY_FROZEN=1 (the
# test suite): a frozen dataclass is built through object.__setattr__ once per field.


@dataclass(frozen=FROZEN, slots=True, unsafe_hash=True)
class HttpRequest:
    method: str                       # upper case
    path: str                         # without the query string, still percent-encoded
    query: bytes                      # raw query string, b"" if none
    headers: dict[str, str]           # names lower-cased; repeated headers joined with ","
    body: bytes
    peer: str | None = None           # the client's IP address, when known (admin access checks)


class HttpResponse(msgspec.Struct, frozen=True, gc=False):
    """A Struct, not a dataclass like the others here: the endpoint builds one per answer, and a
    Struct is built in C (~1,300 instructions fewer), frozen at no cost, and acyclic."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes


@dataclass(frozen=FROZEN, slots=True, unsafe_hash=True)
class RequestContext:
    """What a request's action is interpreted against: its namespace and the URL base that
    queue URLs are built from (so clients get back URLs they can reach)."""

    ns: Namespace
    base_url: str                     # e.g. http://localhost:9324
    trace_header: str | None = None   # X-Amzn-Trace-Id: a SendMessage's AWSTraceHeader
    caller: str | None = None         # the verified signer's account (None: nobody is verified)
