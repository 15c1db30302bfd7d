"""Where each case of the corpus takes AWS's answer from.

A case is one of four kinds, and says which:

* ``recorded``: a public recording of what AWS answered. Mostly LocalStack's snapshot files,
  which its maintainers record against real AWS (``markers.aws.validated``), in both protocols
  (``[sqs]`` is JSON, ``[sqs_query]`` Query); also other suites verified against AWS, and AWS
  answers quoted in public issues.
* ``documented``: the SQS API reference or developer guide.
* ``model``: botocore's SQS service model (error shapes and their Query codes, members).
* ``unknown``: no recording or document found. The case pins what we answer, and README.md
  ("Semantics worth knowing") says that AWS's answer is unknown.
"""

from __future__ import annotations

from dataclasses import dataclass

RECORDED, DOCUMENTED, MODEL, UNKNOWN = "recorded", "documented", "model", "unknown"
KINDS = (RECORDED, DOCUMENTED, MODEL, UNKNOWN)


@dataclass(frozen=True)
class Source:
    kind: str
    ref: str

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind


_LS = "github.com/localstack/localstack tests/aws/services/sqs/"


def snapshot(test: str) -> Source:
    """An AWS answer recorded in LocalStack's test_sqs.snapshot.json (both protocols)."""
    return Source(RECORDED, f"{_LS}test_sqs.snapshot.json, {test}")


def validated(test: str) -> Source:
    """A LocalStack test marked aws.validated: its assertions passed against AWS."""
    return Source(RECORDED, f"{_LS}test_sqs.py::{test} (aws.validated)")


def move_task(test: str) -> Source:
    return Source(RECORDED, f"{_LS}test_sqs_move_task.snapshot.json, {test}")


def justeat(test: str) -> Source:
    """justeattakeaway/LocalSqsSnsMessaging's shared tests, which its ExternalVerification suite
    runs against real AWS."""
    return Source(RECORDED, f"github.com/justeattakeaway/LocalSqsSnsMessaging tests, {test}")


def issue(ref: str) -> Source:
    """An AWS answer quoted in a public issue."""
    return Source(RECORDED, ref)


def api(action: str, what: str = "") -> Source:
    url = f"https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_{action}.html"
    return Source(DOCUMENTED, f"{url} {what}".strip())


def aws_doc(url: str, what: str = "") -> Source:
    """Another AWS document that SQS's answers follow (IAM's evaluation and error texts, the API
    reference's common errors)."""
    return Source(DOCUMENTED, f"{url} {what}".strip())


def model(what: str) -> Source:
    return Source(MODEL, f"botocore data/sqs/2012-11-05/service-2.json: {what}")


def unknown(why: str) -> Source:
    return Source(UNKNOWN, why)
