"""elasticmq_py/auth/sigv4.py: requests signed by botocore's real signers verify, and every
tampering gets AWS's error (the texts are pinned, with their sources, in tests/conformance/test_auth.py)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import pytest
from botocore.auth import SigV4Auth, SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from storage.errors import SqsError

from elasticmq_py.auth import sigv4
from elasticmq_py.auth.credentials import Credential
from elasticmq_py.auth.sigv4 import Identity, Verifier

KEY = Credential("AKIDA", "secret-a", "111111111111")
TEMP = Credential("ASIATEMP", "secret-t", "222222222222", session_token="token-t")
VERIFIER = Verifier([KEY, TEMP])
JSON_BODY = json.dumps({"QueueUrl": "http://localhost:9324/111111111111/q", "MessageBody": "hi"}).encode()
FORM_BODY = (b"Action=SendMessage&Version=2012-11-05&QueueUrl=http%3A%2F%2Flocalhost%3A9324%2F111111111111%2Fq"
             b"&MessageBody=a+b")


class Req:
    """A request as the server receives it, and the time it was signed at."""

    def __init__(self, method, url, headers, body):
        parts = urlsplit(url)
        self.method, self.path, self.query = method, parts.path or "/", parts.query.encode()
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.headers.setdefault("host", parts.netloc)
        self.body = body or b""
        date = self.headers.get("x-amz-date") or dict(p.split("=", 1) for p in parts.query.split("&"))["X-Amz-Date"]
        self.signed_at = sigv4._parse_amz_date(date)

    def verify(self, verifier=VERIFIER, after: float = 0, **changes):
        r = {**vars(self), **changes}
        return verifier.verify(r["method"], r["path"], r["query"], r["headers"], r["body"], self.signed_at + after)


def signed(cred=KEY, body=JSON_BODY, url="http://localhost:9324/", region="us-east-1", service="sqs",
           token=None, headers=None, method="POST") -> Req:
    h = {"X-Amz-Target": "AmazonSQS.SendMessage", "Content-Type": "application/x-amz-json-1.0"} \
        if body == JSON_BODY else {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    h.update(headers or {})
    request = AWSRequest(method, url, data=body, headers=h)
    creds = Credentials(cred.access_key_id, cred.secret_access_key, token or cred.session_token)
    SigV4Auth(creds, service, region).add_auth(request)
    p = request.prepare()
    return Req(method, p.url, dict(p.headers), p.body)


def presigned(cred=KEY, expires=60, token=None,
              url="http://localhost:9324/111111111111/q?Action=ReceiveMessage&Version=2012-11-05") -> Req:
    request = AWSRequest("GET", url)
    creds = Credentials(cred.access_key_id, cred.secret_access_key, token or cred.session_token)
    SigV4QueryAuth(creds, "sqs", "eu-west-1", expires=expires).add_auth(request)
    p = request.prepare()
    return Req("GET", p.url, dict(p.headers), None)


def error(result) -> tuple[str, int, str]:
    assert isinstance(result, SqsError), result
    return result.code, result.status, result.message


# -- what verifies ------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: signed(),                                             # JSON 1.0, as boto3 sends it
    lambda: signed(body=FORM_BODY),                               # Query, as botocore 1.29 sends it
    lambda: signed(body=FORM_BODY, url="http://localhost:9324/111111111111/q"),
    lambda: signed(body=b"", method="GET",
                   url="http://localhost:9324/111111111111/q?Action=ReceiveMessage&AttributeName.1=All"),
    lambda: signed(headers={"X-Amz-Meta": "  two   spaces  "}),   # values trimmed and collapsed
    lambda: signed(headers={"X-Amz-Meta": "a\tb\xa0c"}),             # any whitespace, as str.split sees it
    lambda: signed(cred=TEMP),                                    # temporary credentials
    lambda: presigned(),
    lambda: presigned(cred=TEMP),
], ids=["json", "query", "query-path", "query-get", "header-spaces", "header-whitespace", "session-token",
        "presigned",
        "presigned-token"])
def test_requests_signed_by_botocore_verify(make):
    req = make()
    who = req.verify()
    cred = TEMP if req.headers.get("x-amz-security-token") or b"Security-Token" in req.query else KEY
    assert who == Identity(cred.access_key_id, cred.account_id)


def test_a_request_verifies_at_the_edges_of_the_skew_AWS_allows():
    req = signed()
    assert isinstance(req.verify(after=15 * 60), Identity)
    assert isinstance(req.verify(after=-15 * 60), Identity)


# -- tampering ----------------------------------------------------------------------------------

def _changed_header(req: Req, name: str, value: str) -> dict:
    return {**req.headers, name: value}


def _other_last_digit(auth: str) -> str:
    return auth[:-1] + ("1" if auth[-1] == "0" else "0")


@pytest.mark.parametrize("tamper", [
    lambda r: {"body": r.body + b" "},
    lambda r: {"path": "/111111111111/other"},
    lambda r: {"query": b"Action=ListQueues"},
    lambda r: {"method": "PUT"},
    lambda r: {"headers": _changed_header(r, "x-amz-target", "AmazonSQS.DeleteQueue")},
    lambda r: {"headers": _changed_header(r, "host", "elsewhere:9324")},
    lambda r: {"headers": _changed_header(r, "x-amz-date", _other_last_digit(r.headers["x-amz-date"][:-1]) + "Z")},
    lambda r: {"headers": _changed_header(r, "authorization", r.headers["authorization"].replace(
        "/us-east-1/", "/eu-west-1/"))},
    lambda r: {"headers": _changed_header(r, "authorization", _other_last_digit(r.headers["authorization"]))},
    lambda r: {"headers": _changed_header(r, "authorization", r.headers["authorization"][:-1] + "\u00e9")},
], ids=["body", "path", "query", "method", "signed-header", "host", "date", "scope-region", "signature",
        "signature-not-ascii"])
def test_a_tampered_request_does_not_match(tamper):
    req = signed()
    code, status, message = error(req.verify(**tamper(req)))
    assert (code, status) == ("SignatureDoesNotMatch", 403)
    assert message.startswith(sigv4.MISMATCH_MESSAGE + "\n\nThe Canonical String for this request should have been\n'")
    assert "\n\nThe String-to-Sign should have been\n'AWS4-HMAC-SHA256\n" in message


def test_a_signed_header_that_is_missing_is_signed_as_empty():
    req = signed(headers={"X-Amz-Meta": "v"})
    headers = {k: v for k, v in req.headers.items() if k != "x-amz-meta"}
    message = error(req.verify(headers=headers))[2]
    assert "\nx-amz-meta:\n" in message


def test_the_mismatch_message_shows_the_canonical_request_botocore_signed():
    req = signed(body=FORM_BODY)
    message = error(req.verify(body=FORM_BODY + b"&x=1"))[2]
    canonical = message.split("should have been\n'")[1].split("'\n\n")[0]
    lines = canonical.split("\n")
    assert lines[:3] == ["POST", "/", ""]
    assert lines[-2] == "content-type;host;x-amz-date"


def test_a_wrong_secret_does_not_match():
    req = signed(cred=Credential("AKIDA", "not-the-secret", "111111111111"))
    assert error(req.verify())[:2] == ("SignatureDoesNotMatch", 403)


def test_an_unknown_key_is_an_invalid_token():
    req = signed(cred=Credential("AKIDNOBODY", "x", "333333333333"))
    assert error(req.verify()) == ("InvalidClientTokenId", 403,
                                   "The security token included in the request is invalid.")


@pytest.mark.parametrize("cred, token", [(TEMP, "other-token"), (KEY, "a-token")], ids=["wrong", "unexpected"])
def test_a_session_token_must_be_the_credentials_own(cred, token):
    assert error(signed(cred=cred, token=token).verify())[0] == "InvalidClientTokenId"
    assert error(presigned(cred=cred, token=token).verify())[0] == "InvalidClientTokenId"


def test_temporary_credentials_without_their_token_are_invalid():
    req = signed(cred=Credential(TEMP.access_key_id, TEMP.secret_access_key, TEMP.account_id))
    assert error(req.verify())[0] == "InvalidClientTokenId"


def test_the_scope_must_name_sqs_and_aws4_request():
    assert error(signed(service="sns").verify()) == (
        "SignatureDoesNotMatch", 403, "Credential should be scoped to correct service: 'sqs'. ")
    req = signed()
    auth = req.headers["authorization"].replace("/aws4_request", "/aws5_request")
    assert error(req.verify(headers=_changed_header(req, "authorization", auth))) == (
        "SignatureDoesNotMatch", 403, "Credential should be scoped with a valid terminator: 'aws4_request', "
                                      "not 'aws5_request'. ")


def test_the_scope_day_must_be_the_request_day():
    req = signed()
    date = req.headers["x-amz-date"]
    day = "20000101" if not date.startswith("2000") else "20010101"
    auth = req.headers["authorization"].replace(f"/{date[:8]}/", f"/{day}/")
    assert error(req.verify(headers=_changed_header(req, "authorization", auth))) == (
        "SignatureDoesNotMatch", 403, f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of "
                                      f"date from HTTP: '{day}' != '{date[:8]}', from '{date}'.")


# -- time ---------------------------------------------------------------------------------------

def test_a_request_older_than_15_minutes_has_expired():
    req = signed()
    code, status, message = error(req.verify(after=15 * 60 + 1))
    now = sigv4._amz(req.signed_at + 15 * 60 + 1)
    assert (code, status) == ("SignatureDoesNotMatch", 403)
    assert message == (f"Signature expired: {req.headers['x-amz-date']} is now earlier than "
                       f"{sigv4._amz(req.signed_at + 1)} ({now} - 15 min.)")


def test_a_request_more_than_15_minutes_ahead_is_not_yet_current():
    req = signed()
    now = req.signed_at - 15 * 60 - 1
    assert error(req.verify(after=-15 * 60 - 1)) == (
        "SignatureDoesNotMatch", 403,
        f"Signature not yet current: {req.headers['x-amz-date']} is still later than {sigv4._amz(now + 900)} "
        f"({sigv4._amz(now)} + 15 min.)")


def test_a_presigned_url_lasts_its_expiry():
    req = presigned(expires=60)
    assert isinstance(req.verify(after=60), Identity)
    assert error(req.verify(after=61)) == ("RequestExpired", 400, "Request has expired.")


def test_a_tampered_presigned_url_does_not_match():
    req = presigned()
    query = req.query.replace(b"ReceiveMessage", b"PurgeQueue")
    assert error(req.verify(query=query))[0] == "SignatureDoesNotMatch"
    query = req.query.replace(b"X-Amz-Expires=60", b"X-Amz-Expires=600")
    assert error(req.verify(query=query))[0] == "SignatureDoesNotMatch"


# -- incomplete or missing ----------------------------------------------------------------------

def test_no_authentication_at_all():
    req = signed()
    headers = {k: v for k, v in req.headers.items() if k != "authorization"}
    assert error(req.verify(headers=headers)) == ("MissingAuthenticationToken", 403,
                                                  "Request is missing Authentication Token")


@pytest.mark.parametrize("auth, message", [
    ("AWS4-HMAC-SHA256 Credential=AKIDA/20240101/us-east-1/sqs/aws4_request",
     "Authorization header requires 'Signature' parameter. Authorization header requires 'SignedHeaders' "
     "parameter. Authorization=AWS4-HMAC-SHA256 Credential=AKIDA/20240101/us-east-1/sqs/aws4_request"),
    ("AWS AKIDA:c2lnbmF0dXJl",
     "Authorization header requires 'Credential' parameter. Authorization header requires 'Signature' "
     "parameter. Authorization header requires 'SignedHeaders' parameter. Authorization=AWS AKIDA:c2lnbmF0dXJl"),
    ("AWS4-HMAC-SHA256 Credential=AKIDA /20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0",
     "'/20240101/us-east-1/sqs/aws4_request' not a valid key=value pair (missing equal-sign) in Authorization "
     "header: 'AWS4-HMAC-SHA256 Credential=AKIDA /20240101/us-east-1/sqs/aws4_request, SignedHeaders=host, "
     "Signature=0'."),
    ("AWS4-HMAC-SHA256 Credential=AKIDA/us-east-1/sqs/aws4_request, SignedHeaders=host, Signature=0",
     "Credential must have exactly 5 slash-delimited elements, e.g. keyid/date/region/service/term, got "
     "'AKIDA/us-east-1/sqs/aws4_request'"),
], ids=["no-signature", "sigv2", "missing-equal-sign", "four-elements"])
def test_an_incomplete_authorization_header(auth, message):
    req = signed()
    assert error(req.verify(headers=_changed_header(req, "authorization", auth))) == (
        "IncompleteSignature", 400, message)


def test_a_header_signature_needs_a_date():
    req = signed()
    headers = {k: v for k, v in req.headers.items() if k != "x-amz-date"}
    assert error(req.verify(headers=headers))[:2] == ("IncompleteSignature", 400)


def test_an_incomplete_presigned_url():
    req = presigned()
    query = b"&".join(p for p in req.query.split(b"&") if not p.startswith(b"X-Amz-Signature="))
    assert error(req.verify(query=query)) == (
        "IncompleteSignature", 400,
        "AWS query-string parameters must include 'X-Amz-Signature'. Re-examine the query-string parameters.")


# -- cost ---------------------------------------------------------------------------------------

def test_signing_keys_are_derived_once_per_secret_day_region_and_service(monkeypatch):
    verifier = Verifier([KEY])
    derived = []
    real = sigv4.hmac.digest
    monkeypatch.setattr(sigv4.hmac, "digest", lambda k, m, d: derived.append(m) or real(k, m, d))
    for _ in range(3):
        assert isinstance(signed().verify(verifier), Identity)
    signed(region="eu-west-1").verify(verifier)
    # four HMACs derive a key, once per scope (requests sign with the scope's prepared HMAC)
    assert derived == [verifier._scopes[c].day.encode() for c in list(verifier._scopes)[:1]] + \
        [b"us-east-1", b"sqs", b"aws4_request"] + derived[4:5] + [b"eu-west-1", b"sqs", b"aws4_request"]
    assert len(verifier._signing_keys) == 2



def test_the_signing_key_is_sigv4s():
    # the example in AWS's SigV4 documentation ("Examples of how to derive a signing key")
    key = Verifier([]).signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20150830", "us-east-1", "iam")
    assert key.hex() == "c4afb1cc5771d871763a393e44b703571b55cc28424d1a5e86da6ed3c154a4b9"
