"""Queue attributes: which exist, their defaults, their validation and their parsed form.

Attributes are stored as SQS shows them (strings), so GetQueueAttributes echoes exactly what was
set; ``QueueConfig`` is the parsed view the engine uses on its hot paths.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Mapping

from storage.errors import INVALID_ATTRIBUTE_NAME, INVALID_ATTRIBUTE_VALUE, INVALID_PARAMETER_VALUE, SqsError
from storage.limits import Limits

FIFO_ONLY = ("FifoQueue", "ContentBasedDeduplication", "DeduplicationScope", "FifoThroughputLimit")
# Given to a standard queue, these two are refused with their own wording rather than as unknown
# (LocalStack's AWS-validated test_create_standard_queue_with_fifo_attribute_raises_error).
FIFO_THROUGHPUT = ("DeduplicationScope", "FifoThroughputLimit")
COMPUTED = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp", "QueueArn")
SETTABLE = ("DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
            "VisibilityTimeout", "Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId",
            "KmsDataKeyReusePeriodSeconds", "SqsManagedSseEnabled", *FIFO_ONLY)
ALL_NAMES = frozenset(SETTABLE + COMPUTED)

DEDUP_WINDOW_MS = 5 * 60 * 1000
_SQS_ARN = re.compile(r"arn:[^:]+:sqs:[^:]+:[^:]+:[^:]+")
MAX_RECEIVE_COUNT_LIMIT = 1000


def invalid_value(name: str, reason: str | None = None) -> SqsError:
    if reason:
        return INVALID_ATTRIBUTE_VALUE(f"Invalid value for the parameter {name}. Reason: {reason}")
    return INVALID_ATTRIBUTE_VALUE(f"Invalid value for the parameter {name}.")


def unknown_attribute(name: str) -> SqsError:
    return INVALID_ATTRIBUTE_NAME(f"Unknown Attribute {name}.")


def sse_conflict() -> SqsError:
    """KMS and SQS-managed encryption asked for together (LocalStack's AWS-validated
    test_sse_kms_and_sqs_are_mutually_exclusive: the code is InvalidAttributeName)."""
    return INVALID_ATTRIBUTE_NAME("You can use one type of server-side encryption (SSE) at one time. "
                                  "You can either enable KMS SSE or SQS SSE.")


def _int_in(lo: int, hi: int | Callable[[Limits], int]) -> Callable[[str, str, Limits], str]:
    def check(name: str, value: str, limits: Limits) -> str:
        top = hi(limits) if callable(hi) else hi
        try:
            n = int(value.strip())
        except (ValueError, AttributeError):
            raise invalid_value(name) from None
        if not lo <= n <= top:
            raise invalid_value(name)
        return str(n)
    return check


def _one_of(*options: str, lower: bool = False) -> Callable[[str, str, Limits], str]:
    def check(name: str, value: str, limits: Limits) -> str:
        v = value.lower() if lower else value
        if v not in options:
            raise invalid_value(name)
        return v
    return check


def _json_object(name: str, value: str, limits: Limits) -> str:
    try:
        doc = json.loads(value)
    except (ValueError, TypeError):
        raise invalid_value(name, "the value is not valid JSON.") from None
    if not isinstance(doc, dict):
        raise invalid_value(name, "the value must be a JSON object.")
    return value


def _any_string(name: str, value: str, limits: Limits) -> str:
    return value


_VALIDATORS: dict[str, Callable[[str, str, Limits], str]] = {
    "DelaySeconds": _int_in(0, lambda lim: lim.max_delay_seconds),
    "MaximumMessageSize": _int_in(1024, lambda lim: lim.max_message_size),
    "MessageRetentionPeriod": _int_in(60, 1_209_600),
    "ReceiveMessageWaitTimeSeconds": _int_in(0, lambda lim: lim.max_wait_seconds),
    "VisibilityTimeout": _int_in(0, lambda lim: lim.max_visibility_timeout),
    "Policy": _json_object,
    "RedrivePolicy": lambda name, value, limits: (parse_redrive_policy(value), value)[1],
    "RedriveAllowPolicy": _json_object,
    "KmsMasterKeyId": _any_string,
    "KmsDataKeyReusePeriodSeconds": _int_in(60, 86_400),
    "SqsManagedSseEnabled": _one_of("true", "false", lower=True),
    "FifoQueue": _one_of("true", "false", lower=True),
    "ContentBasedDeduplication": _one_of("true", "false", lower=True),
    "DeduplicationScope": _one_of("messageGroup", "queue"),
    "FifoThroughputLimit": _one_of("perQueue", "perMessageGroupId"),
}

DEFAULTS_STANDARD = {
    "DelaySeconds": "0",
    "MaximumMessageSize": "1048576",
    "MessageRetentionPeriod": "345600",
    "ReceiveMessageWaitTimeSeconds": "0",
    "VisibilityTimeout": "30",
    "SqsManagedSseEnabled": "true",   # SSE-SQS by default for new queues since Oct 2022
}
DEFAULTS_FIFO = {
    **DEFAULTS_STANDARD,
    "FifoQueue": "true",
    "ContentBasedDeduplication": "false",
    "DeduplicationScope": "queue",
    "FifoThroughputLimit": "perQueue",
}


def validate(attributes: Mapping[str, str], *, fifo: bool, creating: bool, limits: Limits) -> dict[str, str]:
    """Check names and values; return the normalised strings to store.

    Cross-queue rules (RedrivePolicy targets, RedriveAllowPolicy) are the engine's: they need
    the other queues.
    """
    out: dict[str, str] = {}
    for name, value in attributes.items():
        if name not in _VALIDATORS:
            raise unknown_attribute(name)
        if name in FIFO_ONLY and not fifo:
            if name in FIFO_THROUGHPUT:
                raise INVALID_ATTRIBUTE_NAME(f"You can specify the {name} only when FifoQueue is set to true.")
            raise unknown_attribute(name)
        if not isinstance(value, str):
            raise invalid_value(name)
        out[name] = _VALIDATORS[name](name, value, limits)
        if name == "FifoQueue" and not creating and out[name] != "true":
            # A FIFO queue may be told it is one (answered 200); a queue's type never changes.
            raise invalid_value("FifoQueue", "Modifying queue type is not supported.")
    if out.get("KmsMasterKeyId") and out.get("SqsManagedSseEnabled") == "true":
        raise sse_conflict()
    if out.get("DeduplicationScope") == "queue" and out.get("FifoThroughputLimit") == "perMessageGroupId":
        raise invalid_value("FifoThroughputLimit",
                            "FifoThroughputLimit perMessageGroupId requires DeduplicationScope messageGroup.")
    return out


def with_defaults(attributes: Mapping[str, str], fifo: bool) -> dict[str, str]:
    out = dict(DEFAULTS_FIFO if fifo else DEFAULTS_STANDARD)
    if attributes.get("KmsMasterKeyId"):
        out["SqsManagedSseEnabled"] = "false"
        out.setdefault("KmsDataKeyReusePeriodSeconds", "300")
    out.update(attributes)
    return out


@dataclass(frozen=True, slots=True)
class RedrivePolicy:
    dlq_arn: str
    max_receive_count: int


def parse_redrive_policy(value: str) -> RedrivePolicy:
    """Accept what SQS accepts: a JSON map with deadLetterTargetArn and maxReceiveCount (a number
    or a numeric string)."""
    def bad(reason: str) -> SqsError:
        return INVALID_PARAMETER_VALUE(
            f"Value {value} for parameter RedrivePolicy is invalid. Reason: {reason}")
    try:
        doc = json.loads(value)
    except (ValueError, TypeError):
        doc = None
    if not isinstance(doc, dict):
        # SQS answers unparseable JSON with a different code and wording than bad content.
        raise invalid_value("RedrivePolicy", "Redrive policy is not a valid JSON map.")
    for required in ("deadLetterTargetArn", "maxReceiveCount"):
        if required not in doc:
            raise bad(f"Redrive policy does not contain mandatory attribute: {required}.")
    arn, count = doc["deadLetterTargetArn"], doc["maxReceiveCount"]
    if not isinstance(arn, str) or not _SQS_ARN.fullmatch(arn):
        # checked before any lookup: LocalStack's AWS-recorded test_invalid_dead_letter_arn_rejected_before_lookup
        raise bad("Invalid value for deadLetterTargetArn.")
    extra = set(doc) - {"deadLetterTargetArn", "maxReceiveCount"}
    if extra:
        raise bad("Only following attributes are supported: [deadLetterTargetArn, maxReceiveCount].")
    try:
        n = int(count) if not isinstance(count, bool) else None
    except (TypeError, ValueError):
        n = None
    if n is None or not 1 <= n <= MAX_RECEIVE_COUNT_LIMIT:
        raise bad(f"Invalid value for maxReceiveCount: {count}, valid values are from 1 to "
                  f"{MAX_RECEIVE_COUNT_LIMIT} both inclusive.")
    return RedrivePolicy(arn, n)


@dataclass(frozen=True, slots=True)
class RedriveAllowPolicy:
    permission: str                 # allowAll | denyAll | byQueue
    source_arns: frozenset[str]

    def allows(self, source_arn: str) -> bool:
        if self.permission == "allowAll":
            return True
        if self.permission == "byQueue":
            return source_arn in self.source_arns
        return False


def parse_redrive_allow_policy(value: str) -> RedriveAllowPolicy:
    def bad(reason: str) -> SqsError:
        return INVALID_ATTRIBUTE_VALUE(
            f"Value {value} for parameter RedriveAllowPolicy is invalid. Reason: {reason}")
    try:
        doc = json.loads(value)
    except ValueError:
        raise bad("Redrive allow policy is not a valid JSON map.") from None
    if not isinstance(doc, dict):
        raise bad("Redrive allow policy is not a valid JSON map.")
    permission = doc.get("redrivePermission")
    arns = doc.get("sourceQueueArns")
    if permission not in ("allowAll", "denyAll", "byQueue"):
        raise bad("Invalid value for redrivePermission; valid values are allowAll, denyAll and byQueue.")
    if permission == "byQueue":
        if not isinstance(arns, list) or not 1 <= len(arns) <= 10 or not all(isinstance(a, str) for a in arns):
            raise bad("sourceQueueArns must list between 1 and 10 queue ARNs when redrivePermission is byQueue.")
    elif arns is not None:
        raise bad("sourceQueueArns may be given only when redrivePermission is byQueue.")
    return RedriveAllowPolicy(permission, frozenset(arns or ()))


@dataclass(frozen=True, slots=True)
class QueueConfig:
    """The attributes parsed once per change, for the hot paths."""

    fifo: bool
    visibility_ms: int
    delay_ms: int
    retention_ms: int
    max_size: int
    wait_seconds: int
    redrive: RedrivePolicy | None
    redrive_allow: RedriveAllowPolicy | None
    content_dedup: bool

    @classmethod
    def parse(cls, attributes: Mapping[str, str]) -> "QueueConfig":
        rp = attributes.get("RedrivePolicy")
        rap = attributes.get("RedriveAllowPolicy")
        return cls(
            fifo=attributes.get("FifoQueue") == "true",
            visibility_ms=int(attributes["VisibilityTimeout"]) * 1000,
            delay_ms=int(attributes["DelaySeconds"]) * 1000,
            retention_ms=int(attributes["MessageRetentionPeriod"]) * 1000,
            max_size=int(attributes["MaximumMessageSize"]),
            wait_seconds=int(attributes["ReceiveMessageWaitTimeSeconds"]),
            redrive=parse_redrive_policy(rp) if rp else None,
            redrive_allow=parse_redrive_allow_policy(rap) if rap else None,
            content_dedup=attributes.get("ContentBasedDeduplication") == "true",
        )
