"""SQS errors as storage raises them, carrying everything each wire protocol needs.

An error has two names because SQS has two protocols: the JSON 1.0 protocol reports the Smithy
shape name in ``__type`` (``QueueDoesNotExist``) and the legacy Query code in the
``X-Amzn-Query-Error`` header (``AWS.SimpleQueueService.NonExistentQueue``); the Query protocol
reports only the legacy code. botocore (``awsQueryCompatible``) surfaces the legacy code as
``Error.Code``, so that is the one users match on.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ErrorKind:
    shape: str          # JSON protocol __type: without the namespace prefix for SQS's own shapes,
                        # fully qualified (with "#") for the common front end's
    query_code: str     # legacy Query protocol code, also X-Amzn-Query-Error
    status: int = 400
    sender_fault: bool = True

    def __call__(self, message: str) -> "SqsError":
        return SqsError(self, message)


class SqsError(Exception):
    """An error a client must see, with the SQS code, message and HTTP status.

    ``applied``: mutations the command had already applied when it failed. Empty unless a
    command broke the contract that it validates completely before changing anything; a
    replicated runtime must still stream them, or its replicas fall out of step."""

    def __init__(self, kind: ErrorKind, message: str):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.applied: tuple = ()

    @property
    def code(self) -> str:
        return self.kind.query_code

    @property
    def status(self) -> int:
        return self.kind.status

    @property
    def sender_fault(self) -> bool:
        return self.kind.sender_fault

    def __repr__(self) -> str:
        return f"SqsError({self.kind.query_code!r}, {self.message!r})"


# Modelled errors (botocore's sqs service model, with their legacy Query codes).
QUEUE_DOES_NOT_EXIST = ErrorKind("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue")
QUEUE_NAME_EXISTS = ErrorKind("QueueNameExists", "QueueAlreadyExists")
QUEUE_DELETED_RECENTLY = ErrorKind("QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently")
MESSAGE_NOT_INFLIGHT = ErrorKind("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight")
RECEIPT_HANDLE_IS_INVALID = ErrorKind("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid")
PURGE_QUEUE_IN_PROGRESS = ErrorKind("PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", 403)
TOO_MANY_ENTRIES = ErrorKind("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest")
EMPTY_BATCH = ErrorKind("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest")
BATCH_IDS_NOT_DISTINCT = ErrorKind("BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct")
BATCH_REQUEST_TOO_LONG = ErrorKind("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong")
INVALID_BATCH_ENTRY_ID = ErrorKind("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId")
INVALID_ATTRIBUTE_NAME = ErrorKind("InvalidAttributeName", "InvalidAttributeName")
INVALID_ATTRIBUTE_VALUE = ErrorKind("InvalidAttributeValue", "InvalidAttributeValue")
INVALID_MESSAGE_CONTENTS = ErrorKind("InvalidMessageContents", "InvalidMessageContents")
OVER_LIMIT = ErrorKind("OverLimit", "OverLimit", 403)
UNSUPPORTED_OPERATION = ErrorKind("UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation")
RESOURCE_NOT_FOUND = ErrorKind("ResourceNotFoundException", "ResourceNotFoundException", 404)
REQUEST_THROTTLED = ErrorKind("RequestThrottled", "RequestThrottled")

# Common AWS errors that the model does not list but SQS returns.
INVALID_PARAMETER_VALUE = ErrorKind("InvalidParameterValueException", "InvalidParameterValue")
MISSING_PARAMETER = ErrorKind("MissingRequiredParameterException", "MissingParameter")
INVALID_ACTION = ErrorKind("InvalidActionException", "InvalidAction")
UNSUPPORTED_ACTION = ErrorKind("UnsupportedActionException", "AWS.SimpleQueueService.UnsupportedOperation")
SERVICE_UNAVAILABLE = ErrorKind("ServiceUnavailable", "ServiceUnavailable", 503, sender_fault=False)
INTERNAL_ERROR = ErrorKind("InternalError", "InternalError", 500, sender_fault=False)
THROTTLING = ErrorKind("ThrottlingException", "ThrottlingException", 400)


def invalid_parameter(name: str, value: object, reason: str) -> SqsError:
    """SQS's usual wording for one bad parameter."""
    return INVALID_PARAMETER_VALUE(f"Value {value} for parameter {name} is invalid. Reason: {reason}.")


def missing_parameter(name: str) -> SqsError:
    return MISSING_PARAMETER(f"The request must contain the parameter {name}.")


def queue_does_not_exist() -> SqsError:
    return QUEUE_DOES_NOT_EXIST("The specified queue does not exist.")
