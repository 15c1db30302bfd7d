"""Authentication and cross-account errors, in both protocols, from a server with
``[auth] mode = "sigv4"`` (elasticmq_py/auth/, storage/access.py).

Each case signs with real botocore (boto3's JSON client, or botocore 1.29's Query model) under
some credentials and checks status, code and message as the SDK reports them, and for JSON the
``__type`` botocore reads into ``QueryErrorCode``. AWS answers these from its common front end,
not from SQS's model, so their recordings are AWS answers quoted in public issues; where a part
of an answer was never recorded, the case says so and docs/semantics.md lists it.
"""

from __future__ import annotations

import datetime
import json
import re
import urllib.request
import uuid
from dataclasses import dataclass, field
from typing import Callable

import botocore.auth
import pytest
from botocore.config import Config as BotoConfig

from tests.conformance import sources as src
from tests.conformance.conftest import JSON, JSON_SESSION, QUERY, http
from tests.conformance.helpers import error_of
from tests.endpoint.auth_server import sigv4_server
from tests.endpoint.conftest import ServerProcess

OWNER = ("AKIDOWNER", "owner-secret", "111111111111")
OTHER = ("AKIDOTHER", "other-secret", "222222222222")
TEMP = ("ASIATEMPKEY", "temp-secret", "333333333333", "the-session-token")
_CONFIG = BotoConfig(retries={"max_attempts": 1}, read_timeout=30)
_STAMP = r"\d{8}T\d{6}Z"

MISMATCH = ("The request signature we calculated does not match the signature you provided. Check your AWS Secret "
            "Access Key and signing method. Consult the service documentation for details.")
INVALID_TOKEN = "The security token included in the request is invalid."

_FLOCI = ("floci's IAM-enforcement notes, 'AWS response shapes' R1 (SQS JSON: 403, x-amzn-query-error "
          "AccessDenied;Sender, __type com.amazon.coral.service#AccessDeniedException) and R3 (SQS Query: 403, "
          "ErrorResponse Code AccessDenied), measured against AWS")
IAM_DENIED = src.aws_doc("https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_access-denied.html",
                         "'User: ... is not authorized to perform: ... because no resource-based policy allows the "
                         "... action'")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = sigv4_server(tmp_path_factory.mktemp("auth"), OWNER, OTHER, TEMP)
    yield s
    err = s.stop()
    assert "Traceback" not in err, err


@dataclass
class As:
    """Clients of one protocol and one fresh region, signing as whoever a case asks."""
    server: ServerProcess
    protocol: str
    region: str
    query_session: object

    def client(self, key=OWNER, secret=None, token=None):
        creds = {"aws_access_key_id": key[0], "aws_secret_access_key": secret or key[1],
                 "aws_session_token": token if token is not None else (key[3] if len(key) > 3 else None)}
        if self.protocol == JSON:
            return JSON_SESSION.client("sqs", endpoint_url=self.server.url, region_name=self.region,
                                       config=_CONFIG, **creds)
        return self.query_session.create_client("sqs", endpoint_url=self.server.url, region_name=self.region,
                                                config=_CONFIG, **creds)

    def queue(self, name: str = "q") -> str:
        return self.client().create_queue(QueueName=name)["QueueUrl"]


@pytest.fixture
def signer(server, protocol, query_session) -> As:
    return As(server, protocol, f"auth-{uuid.uuid4().hex[:10]}", query_session)


@pytest.fixture
def signing_time(monkeypatch) -> Callable[[float], None]:
    """Make botocore sign as if its clock were ``offset_s`` seconds off."""
    def shift(offset_s: float) -> None:
        when = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=offset_s)
        monkeypatch.setattr(botocore.auth, "get_current_datetime", lambda: when.replace(tzinfo=None))
    return shift


@dataclass(frozen=True)
class Case:
    id: str
    call: Callable[[As, Callable[[float], None]], object]
    status: int
    code: str
    message: str | re.Pattern
    source: src.Source
    json_type: str | None = None          # the JSON __type's name, as botocore's QueryErrorCode
    also: tuple[src.Source, ...] = field(default=())


def _send(a: As, client) -> object:
    return client.send_message(QueueUrl=a.queue(), MessageBody="m")


def _skewed(a: As, shift, offset_s: float) -> object:
    url = a.queue()
    shift(offset_s)
    return a.client().send_message(QueueUrl=url, MessageBody="m")


CASES = [
    Case("unknown-access-key", lambda a, _: _send(a, a.client(("AKIDNOBODY", "x"))),
         403, "InvalidClientTokenId", INVALID_TOKEN,
         src.issue("github.com/ex-aws/ex_aws issue #220: SQS Query, 403, Sender, InvalidClientTokenId, "
                   "'The security token included in the request is invalid.'"),
         "UnrecognizedClientException",
         also=(src.issue("github.com/localstack/localstack issue #3562 (SQS, 403 InvalidClientTokenId)"),
               src.unknown("the JSON __type is AWS's JSON services' name for this error (UnrecognizedClientException); "
                           "SQS's own was not found recorded"))),
    Case("wrong-session-token", lambda a, _: _send(a, a.client(TEMP, token="not-the-token")),
         403, "InvalidClientTokenId", INVALID_TOKEN,
         src.unknown("for a session token AWS's recorded text is the same 'security token ... is invalid' as for "
                     "an unknown key (ex_aws #220); SQS's answer to a wrong token itself is not recorded"),
         "UnrecognizedClientException"),
    Case("session-token-missing", lambda a, _: _send(a, a.client(TEMP, token="")),
         403, "InvalidClientTokenId", INVALID_TOKEN,
         src.unknown("temporary credentials sent without their token: as a wrong token"),
         "UnrecognizedClientException"),
    Case("wrong-secret", lambda a, _: _send(a, a.client(OWNER, secret="not-the-secret")),
         403, "SignatureDoesNotMatch",
         re.compile(re.escape(MISMATCH) + r"\n\nThe Canonical String for this request should have been\n'POST\n/\n"
                    r".*'\n\nThe String-to-Sign should have been\n'AWS4-HMAC-SHA256\n" + _STAMP
                    + r"\n\d{8}/auth-[0-9a-f]+/sqs/aws4_request\n[0-9a-f]{64}'\n", re.S),
         src.issue("github.com/boto/boto issue #1573: SQS Query, SignatureDoesNotMatch, the message with the "
                   "canonical string and the string to sign"),
         "InvalidSignatureException",
         also=(src.issue("github.com/aws/aws-sdk-php issue #642: SignatureDoesNotMatch is 403 on SQS"),)),
    Case("signed-16-minutes-ago", lambda a, shift: _skewed(a, shift, -16 * 60),
         403, "SignatureDoesNotMatch",
         re.compile(rf"Signature expired: {_STAMP} is now earlier than {_STAMP} \({_STAMP} - 15 min\.\)"),
         src.issue("github.com/aws/aws-sdk-php issue #642: SQS Query, 403, SignatureDoesNotMatch, 'Signature "
                   "expired: 20150619T100249Z is now earlier than 20150619T100713Z (20150619T102213Z - 15 min.)'"),
         "InvalidSignatureException",
         also=(src.issue("github.com/aws/aws-sdk-go issue #487 (SQS ReceiveMessage, 403, the same text)"),)),
    Case("signed-16-minutes-ahead", lambda a, shift: _skewed(a, shift, 16 * 60),
         403, "SignatureDoesNotMatch",
         re.compile(rf"Signature not yet current: {_STAMP} is still later than {_STAMP} \({_STAMP} \+ 15 min\.\)"),
         src.unknown("SQS's answer is not recorded; the text is AWS's 'Signature not yet current: ... is "
                     "still later than ... (... + N min.)' as quoted for other services (aws-sdk-rust's "
                     "SignatureDoesNotMatch docs, Elastic Beanstalk), with SQS's 15 minutes"),
         "InvalidSignatureException"),
    Case("another-accounts-queue",
         lambda a, _: a.client(OTHER).send_message(QueueUrl=a.queue(), MessageBody="m"),
         403, "AccessDenied",
         re.compile(r"User: arn:aws:iam::222222222222:root is not authorized to perform: sqs:sendmessage on "
                    r"resource: arn:aws:sqs:auth-[0-9a-f]+:111111111111:q because no resource-based policy allows "
                    r"the sqs:sendmessage action"),
         src.issue(_FLOCI), "AccessDeniedException",
         also=(IAM_DENIED,)),
    Case("another-accounts-queue-url",
         lambda a, _: (a.queue("shared"), a.client(OTHER).get_queue_url(
             QueueName="shared", QueueOwnerAWSAccountId=OWNER[2])),
         403, "AccessDenied",
         re.compile(r"User: arn:aws:iam::222222222222:root is not authorized to perform: sqs:getqueueurl on "
                    r"resource: arn:aws:sqs:auth-[0-9a-f]+:111111111111:shared because no resource-based policy "
                    r"allows the sqs:getqueueurl action"),
         src.issue(_FLOCI), "AccessDeniedException", also=(IAM_DENIED,)),
]


def test_case_ids_are_unique_and_every_case_has_a_source():
    assert len({c.id for c in CASES}) == len(CASES)
    assert all(c.source.ref and c.source.kind in src.KINDS for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_error(case: Case, signer, signing_time, protocol):
    err = error_of(lambda: case.call(signer, signing_time))
    assert (err["Status"], err["Code"], err["Type"]) == (case.status, case.code, "Sender")
    if isinstance(case.message, str):
        assert err["Message"] == case.message
    else:
        assert case.message.fullmatch(err["Message"]), err["Message"]
    if protocol == JSON and case.json_type is not None:
        assert err["QueryErrorCode"] == case.json_type


def test_the_expired_signature_names_the_times_it_compared(signer, signing_time):
    url = signer.queue()
    signing_time(-20 * 60)
    message = error_of(lambda: signer.client().send_message(QueueUrl=url, MessageBody="m"))["Message"]
    signed, earliest, now = re.findall(_STAMP, message)
    parse = lambda s: datetime.datetime.strptime(s, "%Y%m%dT%H%M%SZ")   # noqa: E731
    assert parse(now) - parse(earliest) == datetime.timedelta(minutes=15)
    assert datetime.timedelta(minutes=19) < parse(now) - parse(signed) < datetime.timedelta(minutes=21)


# -- what no SDK sends: raw HTTP ----------------------------------------------------------------

def _unsigned(server, protocol: str, headers: dict | None = None):
    if protocol == JSON:
        return http(server, "POST", "/", b"{}", {"Content-Type": "application/x-amz-json-1.0",
                                                 "X-Amz-Target": "AmazonSQS.ListQueues", **(headers or {})})
    return http(server, "POST", "/", b"Action=ListQueues&Version=2012-11-05",
                {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})})


def _error(protocol: str, status: int, headers: dict, body: bytes) -> tuple:
    """(status, Query code, message, JSON __type or None) of a raw error response."""
    if protocol == JSON:
        doc = json.loads(body)
        code, fault = headers["x-amzn-query-error"].split(";")
        assert fault == "Sender"
        return status, code, doc["message"], doc["__type"]
    m = re.fullmatch(r'<\?xml version="1.0"\?><ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/">'
                     r"<Error><Type>Sender</Type><Code>(.*)</Code><Message>(.*)</Message><Detail/></Error>"
                     r"<RequestId>.*</RequestId></ErrorResponse>", body.decode(), re.S)
    assert m, body
    return status, m.group(1), m.group(2), None


# MissingAuthenticationToken and IncompleteSignature: codes and statuses as SQS's API reference lists
# them (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/CommonErrors.html:
# MissingAuthenticationToken 403, IncompleteSignature 400). The missing-token
# text is AWS's front end's (API Gateway's "Missing Authentication Token" family); the incomplete
# texts are AWS's as quoted for other services: amazonka issue #316 (SES, 400, "Authorization header
# requires 'Signature' parameter. ... Authorization=..."), aws-sdk-go issue #289 ("... not a valid
# key=value pair (missing equal-sign) in Authorization header: ..."), and, for SQS itself,
# YumaInaura's aws-sdk-sqs report ("Credential must have exactly 5 slash-delimited elements").

def test_a_request_without_authentication(server, protocol):
    status, code, message, json_type = _error(protocol, *_unsigned(server, protocol))
    assert (status, code, message) == (403, "MissingAuthenticationToken", "Request is missing Authentication Token")
    assert json_type in (None, "com.amazon.coral.service#MissingAuthenticationTokenException")


def test_an_incomplete_authorization_header(server, protocol):
    auth = "AWS4-HMAC-SHA256 Credential=AKIDOWNER/20240101/us-east-1/sqs/aws4_request"
    headers = {"Authorization": auth, "X-Amz-Date": "20240101T000000Z"}
    status, code, message, json_type = _error(protocol, *_unsigned(server, protocol, headers))
    assert (status, code) == (400, "IncompleteSignature")
    assert message == ("Authorization header requires 'Signature' parameter. Authorization header requires "
                       f"'SignedHeaders' parameter. Authorization={auth}")
    assert json_type in (None, "com.amazon.coral.service#IncompleteSignatureException")


# -- presigned URLs (Query) -----------------------------------------------------------------------

def _presigned_receive(signer: As, expires: int) -> str:
    url = signer.queue()
    signer.client().send_message(QueueUrl=url, MessageBody="presigned")
    query = As(signer.server, QUERY, signer.region, signer.query_session).client()
    # HttpMethod: botocore signs a Query action as POST unless told the URL will be fetched with GET
    return query.generate_presigned_url("receive_message", Params={"QueueUrl": url}, ExpiresIn=expires,
                                        HttpMethod="GET")


def test_a_presigned_url_works_until_it_expires(server, query_session, signing_time):
    signer = As(server, QUERY, f"auth-{uuid.uuid4().hex[:10]}", query_session)
    with urllib.request.urlopen(_presigned_receive(signer, 60), timeout=30) as r:
        assert r.status == 200 and b"<Body>presigned</Body>" in r.read()
    signing_time(-120)
    status, headers, body = http(server, "GET", "/" + _presigned_receive(signer, 60).split("/", 3)[3])
    # RequestExpired, 400: SQS's Common Errors ("more than 15 minutes after the request expiration
    # date (such as for pre-signed URLs)"); the message text is not recorded (docs/semantics.md)
    assert _error(QUERY, status, headers, body)[:3] == (400, "RequestExpired", "Request has expired.")


# -- accounts -----------------------------------------------------------------------------------

def test_cross_account_access_follows_add_and_remove_permission(signer):
    owner, other = signer.client(OWNER), signer.client(OTHER)
    url = signer.queue("shared")
    assert url.endswith("/111111111111/shared")
    assert error_of(lambda: other.send_message(QueueUrl=url, MessageBody="m"))["Code"] == "AccessDenied"
    owner.add_permission(QueueUrl=url, Label="other-sends", AWSAccountIds=[OTHER[2]],
                         Actions=["SendMessage", "GetQueueUrl", "ReceiveMessage"])
    assert other.get_queue_url(QueueName="shared", QueueOwnerAWSAccountId=OWNER[2])["QueueUrl"] == url
    other.send_message(QueueUrl=url, MessageBody="from the other account")
    (msg,) = other.receive_message(QueueUrl=url)["Messages"]
    assert msg["Body"] == "from the other account"
    # granted actions only; DeleteMessage was not
    assert error_of(lambda: other.delete_message(QueueUrl=url, ReceiptHandle=msg["ReceiptHandle"]))["Code"] \
        == "AccessDenied"
    # owner-only actions cannot be granted (AddPermission refuses them), nor taken by the other account
    assert error_of(lambda: other.remove_permission(QueueUrl=url, Label="other-sends"))["Code"] == "AccessDenied"
    owner.remove_permission(QueueUrl=url, Label="other-sends")
    assert error_of(lambda: other.send_message(QueueUrl=url, MessageBody="m"))["Code"] == "AccessDenied"


def test_each_key_lists_and_names_its_own_account(signer):
    owner, other = signer.client(OWNER), signer.client(OTHER)
    mine = owner.create_queue(QueueName="mine")["QueueUrl"]
    theirs = other.create_queue(QueueName="mine")["QueueUrl"]
    assert mine.endswith("/111111111111/mine") and theirs.endswith("/222222222222/mine")
    assert owner.list_queues()["QueueUrls"] == [mine]
    assert other.list_queues()["QueueUrls"] == [theirs]
    arn = other.get_queue_attributes(QueueUrl=theirs, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert arn == f"arn:aws:sqs:{signer.region}:222222222222:mine"
