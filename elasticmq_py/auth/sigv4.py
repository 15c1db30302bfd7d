"""Signature Version 4 verification of SQS requests, sans-I/O.

``Verifier.verify(method, path, query, headers, body, now)`` returns the ``Identity`` that signed
the request, or the ``SqsError`` AWS answers for it (a value, not raised: the caller renders it
in the request's protocol). Both forms AWS accepts are verified: the Authorization header (JSON
1.0 as boto3 sends it, Query as botocore 1.29 and the AWS CLI send it) and presigned Query URLs
(X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires, X-Amz-SignedHeaders,
X-Amz-Signature in the query string, as botocore's SigV4QueryAuth makes them), with or without
X-Amz-Security-Token.

What is checked, in AWS's order as far as the recordings show it: the header or query parameters
are complete (IncompleteSignature); the key is known and, for temporary credentials, the session
token matches (InvalidClientTokenId); the scope is <day>/<region>/sqs/aws4_request and its day
is the request's (SignatureDoesNotMatch); the request time is within 15 minutes of ours, or a
presigned URL has not expired (SignatureDoesNotMatch "Signature expired" / "not yet current";
RequestExpired); and the signature over the canonical request (method, path, query, signed
headers, payload hash) is the one we compute (SignatureDoesNotMatch, with the canonical request
and string to sign in the message, as SQS answers). The scope's region is not checked against a
list: any region is a namespace here (elasticmq_py/protocol/addressing.py).

The canonical request is built here and not with botocore's SigV4Auth: botocore is not a
dependency of the server (only of the tests), and its signer canonicalises an ``AWSRequest`` it
is about to send, from unencoded parameters, while a verifier starts from the bytes that arrived.
The rules are the same (SigV4 documentation; botocore.auth's canonical_request): the path
normalised and percent-encoded again, query pairs decoded, re-encoded and sorted, header values
trimmed with inner runs of spaces collapsed, the payload's SHA-256 unless X-Amz-Content-SHA256
names it. The tests sign with botocore's real signers, so the two cannot drift apart silently.

Cost: a client's credential scope (key/day/region/service/terminator) stays the same all day;
what it resolves to (the credential, the identity, the derived signing key) is kept per scope,
so a request costs two SHA-256 and one HMAC over short strings plus the canonical request's
string building (bench/sigv4_bench.py measures it).
"""

from __future__ import annotations

import hashlib
import hmac
from calendar import timegm
from dataclasses import dataclass
from operator import itemgetter
from time import strftime, gmtime
from typing import Any, Iterable
from urllib.parse import quote, unquote

from storage.errors import ErrorKind, SqsError

from elasticmq_py.auth.credentials import Credential

ALGORITHM = "AWS4-HMAC-SHA256"
SERVICE = "sqs"
TERMINATOR = "aws4_request"
MAX_SKEW_S = 15 * 60          # "(... - 15 min.)": SQS's allowance, in every recorded answer
MAX_EXPIRES_S = 7 * 24 * 3600  # the longest X-Amz-Expires SigV4 allows
_EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()

# AWS's common front end answers these, not SQS's model: JSON __type in its own namespace,
# X-Amzn-Query-Error with the Query code (tests/conformance/test_auth.py cites each).
INVALID_CLIENT_TOKEN_ID = ErrorKind("com.amazon.coral.service#UnrecognizedClientException",
                                    "InvalidClientTokenId", 403)
SIGNATURE_DOES_NOT_MATCH = ErrorKind("com.amazon.coral.service#InvalidSignatureException",
                                     "SignatureDoesNotMatch", 403)
MISSING_AUTHENTICATION_TOKEN = ErrorKind("com.amazon.coral.service#MissingAuthenticationTokenException",
                                         "MissingAuthenticationToken", 403)
INCOMPLETE_SIGNATURE = ErrorKind("com.amazon.coral.service#IncompleteSignatureException",
                                 "IncompleteSignature", 400)
REQUEST_EXPIRED = ErrorKind("com.amazon.coral.service#RequestExpired", "RequestExpired", 400)

INVALID_TOKEN_MESSAGE = "The security token included in the request is invalid."
MISSING_TOKEN_MESSAGE = "Request is missing Authentication Token"
MISMATCH_MESSAGE = ("The request signature we calculated does not match the signature you provided. Check your "
                    "AWS Secret Access Key and signing method. Consult the service documentation for details.")
EXPIRED_MESSAGE = "Request has expired."

_HEADER_START = ALGORITHM + " Credential="
_CRED_AT = len(_HEADER_START)
_NONE, _NL, _SPACE = "", "\n", " "
_sha256, _compare = hashlib.sha256, hmac.compare_digest

_PRESIGN_PARAMS = ("X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-Expires", "X-Amz-SignedHeaders",
                   "X-Amz-Signature")


@dataclass(frozen=True, slots=True)
class Identity:
    """Who signed a request: the key and the account it acts as."""
    access_key_id: str
    account_id: str


@dataclass(frozen=True, slots=True)
class _Scope:
    """What the start of an Authorization header (or a presigned X-Amz-Credential) resolves to."""
    credential: Credential
    identity: Identity
    day: str
    scope: str           # day/region/service/terminator
    key: bytes           # the derived signing key
    # HMAC-SHA256 under that key with its padded key already hashed in: a copy and two updates
    # per request (~0.5 us) instead of a new HMAC (~1.3 us)
    inner: Any
    outer: Any

    def sign(self, message: bytes) -> str:
        """HMAC-SHA256(key, message), hex."""
        i = self.inner.copy()
        i.update(message)
        o = self.outer.copy()
        o.update(i.digest())
        return o.hexdigest()


@dataclass(frozen=True, slots=True)
class _Client:
    """A credential scope and a SignedHeaders list, ready to check requests signed with them."""
    scope: _Scope
    headers: "_SignedHeaders"
    signed: str          # "\n" SignedHeaders "\n", as the canonical request has it


class Verifier:
    def __init__(self, credentials: Iterable[Credential], max_skew_s: int = MAX_SKEW_S):
        self._by_key = {c.access_key_id: c for c in credentials}
        self._max_skew_s = max_skew_s
        # (secret, day, region, service) -> signing key: four HMACs saved per request
        self._signing_keys: dict[tuple[str, str, str, str], bytes] = {}
        # a Credential= value (key/day/region/service/terminator) -> its _Scope, or its error
        self._scopes: dict[str, _Scope | SqsError] = {}
        # X-Amz-Date -> seconds since the epoch, for the dates that parsed
        self._dates: dict[str, int] = {}
        # an Authorization header up to ", Signature=" -> its _Client
        self._clients: dict[str, _Client] = {}

    # -- entry point ---------------------------------------------------------------------------

    def verify(self, method: str, path: str, query: bytes, headers: dict[str, str], body: bytes,
               now: float) -> Identity | SqsError:
        auth = headers.get("authorization")
        if auth is not None:
            return self._verify_header(auth, method, path, query, headers, body, now)
        if query and b"X-Amz-" in query:
            pairs = _pairs(query)
            if any(k in _PRESIGN_PARAMS for k, _ in pairs):
                return self._verify_presigned(pairs, method, path, headers, body, now)
        return MISSING_AUTHENTICATION_TOKEN(MISSING_TOKEN_MESSAGE)

    def signing_key(self, secret: str, day: str, region: str, service: str) -> bytes:
        """HMAC-SHA256 chained over the scope (SigV4's derived key), cached: it changes daily."""
        k = (secret, day, region, service)
        key = self._signing_keys.get(k)
        if key is None:
            key = hmac.digest(("AWS4" + secret).encode(), day.encode(), "sha256")
            for part in (region, service, TERMINATOR):
                key = hmac.digest(key, part.encode(), "sha256")
            if len(self._signing_keys) >= 1024:   # keys x days x regions; bounded all the same
                self._signing_keys.clear()
            self._signing_keys[k] = key
        return key

    # -- the Authorization header ----------------------------------------------------------------

    def _verify_header(self, auth: str, method: str, path: str, query: bytes, headers: dict[str, str],
                       body: bytes, now: float) -> Identity | SqsError:
        # One function, locals and all: it runs for every request (bench/sigv4_bench.py). A
        # client's header up to ", Signature=" (algorithm, credential scope, signed headers)
        # stays the same all day: what it resolves to is kept per client (``_clients``), so a
        # request costs one lookup of it, its canonical request and the hashes.
        at = auth.rfind(", Signature=")
        client = self._clients.get(auth[:at]) if at > 0 else None
        signature = auth[at + 12:]
        if client is None or "," in signature or " " in signature:
            fields = _header_fields(auth)
            if isinstance(fields, SqsError):
                return fields
            credential, signed, signature = fields
            client = None
        amz_date = headers.get("x-amz-date")
        if amz_date is None:
            return INCOMPLETE_SIGNATURE(
                f"Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header. "
                f"Authorization={auth}")
        if client is None:
            # kept only for the common shape, where the text before ", Signature=" alone decides
            # the scope and the signed headers
            client = self._client(credential, signed, auth[:at] if at > 0 and auth[at + 12:] == signature else None)
            if type(client) is not _Client:
                return client
        scope = client.scope
        if headers.get("x-amz-security-token") != scope.credential.session_token:
            return INVALID_CLIENT_TOKEN_ID(INVALID_TOKEN_MESSAGE)
        signed_at = self._dates.get(amz_date)
        if signed_at is None or not amz_date.startswith(scope.day) or \
                not now - self._max_skew_s <= signed_at <= now + self._max_skew_s:
            err = self._check_time(scope, amz_date, now, None)
            if err is not None:
                return err
        # The signed headers' lines in a few calls into C. SigV4 trims each value and collapses
        # its runs of whitespace; the values SDKs send need neither, which one look at the block
        # tells (the HTTP parser refuses control characters other than tab in a value).
        fmt = client.headers
        try:
            lines = fmt.template % fmt.values(headers)
        except KeyError:   # a signed header that is missing: signed as empty
            lines = None
        if lines is None or not lines.isascii() or "\t" in lines or "  " in lines or ": " in lines \
                or " \n" in lines:
            lines = "".join([f"{n}:{_SPACE.join(headers.get(n, _NONE).split())}\n" for n in fmt.names])
        canonical = (f"{method}\n{_PATHS.get(path) or _canonical_path(path)}\n"
                     f"{_canonical_query(query, None) if query else ''}\n{lines}{client.signed}"
                     f"{headers.get('x-amz-content-sha256') or (_sha256(body).hexdigest() if body else _EMPTY_SHA256)}")
        to_sign = f"{ALGORITHM}\n{amz_date}\n{scope.scope}\n{_sha256(canonical.encode()).hexdigest()}"
        if signature.isascii() and _compare(scope.sign(to_sign.encode()), signature):   # (it takes ASCII only)
            return scope.identity
        return _mismatch(canonical, to_sign)

    def _client(self, credential: str, signed: str, prefix: str | None) -> "_Client | SqsError":
        """What a credential scope and a SignedHeaders list resolve to; kept under ``prefix``
        (the Authorization header up to ", Signature="), if given, when they resolve."""
        scope = self._scopes.get(credential)
        if scope is None:
            scope = self._scope(credential)
            if len(self._scopes) >= 4096:   # credentials come from clients: bounded
                self._scopes.clear()
            self._scopes[credential] = scope
        if type(scope) is not _Scope:
            return scope
        fmt = _SIGNED.get(signed) or _signed_format(signed)
        client = _Client(scope, fmt, f"\n{signed}\n")
        if prefix is not None:
            if len(self._clients) >= 4096:   # clients choose these: bounded
                self._clients.clear()
            self._clients[prefix] = client
        return client

    # -- presigned URLs --------------------------------------------------------------------------

    def _verify_presigned(self, pairs: list[tuple[str, str]], method: str, path: str, headers: dict[str, str],
                          body: bytes, now: float) -> Identity | SqsError:
        params = {}
        for k, v in pairs:
            params.setdefault(unquote(k), unquote(v))
        missing = [p for p in _PRESIGN_PARAMS if p not in params]
        if missing:
            return INCOMPLETE_SIGNATURE(f"AWS query-string parameters must include '{missing[0]}'. "
                                        f"Re-examine the query-string parameters.")
        if params["X-Amz-Algorithm"] != ALGORITHM:
            return INCOMPLETE_SIGNATURE(f"Unsupported AWS 'algorithm': '{params['X-Amz-Algorithm']}'")
        scope = self._scope(params["X-Amz-Credential"])
        if isinstance(scope, SqsError):
            return scope
        err = self._check_token(scope.credential, params.get("X-Amz-Security-Token"))
        if err is None:
            expires = params["X-Amz-Expires"]
            if not expires.isdigit() or not 0 < int(expires) <= MAX_EXPIRES_S:
                return INCOMPLETE_SIGNATURE(
                    f"X-Amz-Expires must be an integer between 1 and {MAX_EXPIRES_S}, got '{expires}'. "
                    f"Re-examine the query-string parameters.")
            err = self._check_time(scope, params["X-Amz-Date"], now, int(expires))
        if err is not None:
            return err
        canonical = _canonical(method, path, _canonical_query(None, pairs), headers,
                               params["X-Amz-SignedHeaders"], _payload_hash(body))
        return _check_signature(scope, params["X-Amz-Date"], canonical, params["X-Amz-Signature"])

    # -- the checks ------------------------------------------------------------------------------

    def _scope(self, credential: str) -> _Scope | SqsError:
        parts = credential.split("/")
        if len(parts) != 5:
            return INCOMPLETE_SIGNATURE(f"Credential must have exactly 5 slash-delimited elements, e.g. "
                                        f"keyid/date/region/service/term, got '{credential}'")
        key_id, day, region, service, terminator = parts
        cred = self._by_key.get(key_id)
        if cred is None:
            return INVALID_CLIENT_TOKEN_ID(INVALID_TOKEN_MESSAGE)
        if service != SERVICE:
            return SIGNATURE_DOES_NOT_MATCH(f"Credential should be scoped to correct service: '{SERVICE}'. ")
        if terminator != TERMINATOR:
            return SIGNATURE_DOES_NOT_MATCH(
                f"Credential should be scoped with a valid terminator: '{TERMINATOR}', not '{terminator}'. ")
        key = self.signing_key(cred.secret_access_key, day, region, service)
        padded = key.ljust(64, b"\0")   # SHA-256's block; a derived key is 32 bytes
        return _Scope(cred, Identity(cred.access_key_id, cred.account_id), day, "/".join(parts[1:]), key,
                      _sha256(bytes(b ^ 0x36 for b in padded)), _sha256(bytes(b ^ 0x5C for b in padded)))

    @staticmethod
    def _check_token(cred: Credential, token: str | None) -> SqsError | None:
        """Temporary credentials need their session token; permanent ones take none."""
        if token != cred.session_token:
            return INVALID_CLIENT_TOKEN_ID(INVALID_TOKEN_MESSAGE)
        return None

    def _check_time(self, scope: _Scope, amz_date: str, now: float, expires: int | None) -> SqsError | None:
        signed_at = _parse_amz_date(amz_date)
        if signed_at is not None:
            if len(self._dates) >= 4096:   # a new X-Amz-Date each second, and clients choose them
                self._dates.clear()
            self._dates[amz_date] = signed_at
        else:
            return INCOMPLETE_SIGNATURE(f"Date must be in ISO-8601 'basic format'. Got '{amz_date}'. "
                                        f"See http://en.wikipedia.org/wiki/ISO_8601")
        if scope.day != amz_date[:8]:
            return SIGNATURE_DOES_NOT_MATCH(
                f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
                f"'{scope.day}' != '{amz_date[:8]}', from '{amz_date}'.")
        skew = self._max_skew_s
        if signed_at > now + skew:
            return SIGNATURE_DOES_NOT_MATCH(
                f"Signature not yet current: {amz_date} is still later than {_amz(now + skew)} "
                f"({_amz(now)} + {skew // 60} min.)")
        if expires is not None:
            if now > signed_at + expires:
                return REQUEST_EXPIRED(EXPIRED_MESSAGE)
        elif signed_at < now - skew:
            return SIGNATURE_DOES_NOT_MATCH(
                f"Signature expired: {amz_date} is now earlier than {_amz(now - skew)} "
                f"({_amz(now)} - {skew // 60} min.)")
        return None


def _check_signature(scope: _Scope, amz_date: str, canonical: str, signature: str) -> Identity | SqsError:
    to_sign = f"{ALGORITHM}\n{amz_date}\n{scope.scope}\n{_sha256(canonical.encode()).hexdigest()}"
    if signature.isascii() and _compare(scope.sign(to_sign.encode()), signature):
        return scope.identity
    return _mismatch(canonical, to_sign)


def _mismatch(canonical: str, to_sign: str) -> SqsError:
    return SIGNATURE_DOES_NOT_MATCH(
        f"{MISMATCH_MESSAGE}\n\nThe Canonical String for this request should have been\n'{canonical}'\n\n"
        f"The String-to-Sign should have been\n'{to_sign}'\n")


def _header_fields(auth: str) -> tuple[str, str, str] | SqsError:
    """Credential, SignedHeaders and Signature of an Authorization header, or AWS's complaint."""
    algorithm, _, rest = auth.partition(" ")
    fields: dict[str, str] = {}
    if algorithm == ALGORITHM:
        for part in rest.replace(",", " ").split():   # AWS separates them by "," or spaces
            name, eq, value = part.partition("=")
            if not eq:
                return INCOMPLETE_SIGNATURE(f"'{part}' not a valid key=value pair (missing equal-sign) in "
                                            f"Authorization header: '{auth}'.")
            fields[name] = value
    missing = [f"Authorization header requires '{n}' parameter. "
               for n in ("Credential", "Signature", "SignedHeaders") if n not in fields]
    if missing:
        return INCOMPLETE_SIGNATURE(f"{''.join(missing)}Authorization={auth}")
    return fields["Credential"], fields["SignedHeaders"], fields["Signature"]


def _canonical(method: str, path: str, query: str, headers: dict[str, str], signed: str, payload: str) -> str:
    names = (_SIGNED.get(signed) or _signed_format(signed)).names
    lines = "".join([f"{n}:{_SPACE.join(headers.get(n, _NONE).split())}{_NL}" for n in names])
    return f"{method}\n{_canonical_path(path)}\n{query}\n{lines}\n{signed}\n{payload}"


@dataclass(frozen=True, slots=True)
class _SignedHeaders:
    """A SignedHeaders list, ready to lay out its headers' canonical lines."""
    names: tuple[str, ...]
    template: str        # "name:%s\n" per name
    values: Any          # operator.itemgetter of the names: a dict -> their values, as a tuple


# SignedHeaders=... -> its _SignedHeaders: clients send the same few lists
_SIGNED: dict[str, _SignedHeaders] = {}


def _signed_format(signed: str) -> _SignedHeaders:
    names = tuple(signed.split(";"))
    getter = itemgetter(*names)
    fmt = _SignedHeaders(names, "".join(f"{n.replace('%', '%%')}:%s\n" for n in names),
                         getter if len(names) > 1 else (lambda h: (getter(h),)))
    if len(_SIGNED) >= 1024:
        _SIGNED.clear()
    _SIGNED[signed] = fmt
    return fmt


_PATHS: dict[str, str] = {}


def _canonical_path(path: str) -> str:
    """The path as sent, dot segments and empty segments removed, percent-encoded once more
    (every service but S3 signs it so: botocore.auth.SigV4Auth._normalize_url_path)."""
    out = _PATHS.get(path)
    if out is None:
        segments = []
        for seg in path.split("/"):
            if seg == "..":
                if segments:
                    segments.pop()
            elif seg and seg != ".":
                segments.append(seg)
        norm = "/" + "/".join(segments) + ("/" if path.endswith("/") and segments else "")
        out = quote(norm, safe="/~")
        if len(_PATHS) >= 4096:
            _PATHS.clear()
        _PATHS[path] = out
    return out


def _pairs(query: bytes) -> list[tuple[str, str]]:
    out = []
    for pair in query.decode("latin-1").split("&"):
        if pair:
            k, _, v = pair.partition("=")
            out.append((k, v))
    return out


def _canonical_query(query: bytes | None, pairs: list[tuple[str, str]] | None) -> str:
    """Each name and value decoded and encoded again as SigV4 encodes them, sorted; a presigned
    URL's X-Amz-Signature is not part of what it signs."""
    if pairs is None:
        pairs = _pairs(query)
    encoded = sorted((quote(unquote(k), safe="-_.~"), quote(unquote(v), safe="-_.~"))
                     for k, v in pairs if k != "X-Amz-Signature")
    return "&".join(f"{k}={v}" for k, v in encoded)


def _payload_hash(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest() if body else _EMPTY_SHA256


def _parse_amz_date(s: str) -> int | None:
    """Seconds since the epoch of an ISO-8601 basic-format UTC time (20240101T120000Z)."""
    if len(s) != 16 or s[8] != "T" or s[15] != "Z" or not (s[:8] + s[9:15]).isdigit():
        return None
    try:
        return timegm((int(s[:4]), int(s[4:6]), int(s[6:8]), int(s[9:11]), int(s[11:13]), int(s[13:15])))
    except (ValueError, OverflowError):
        return None


def _amz(t: float) -> str:
    return strftime("%Y%m%dT%H%M%SZ", gmtime(int(t)))
