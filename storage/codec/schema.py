"""The tag table, and per class its field names, type hints and defaults: what the encoders
and decoders are built from (see the package's docstring for the rules of the table)."""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any

import msgspec

from storage import commands as _c
from storage import errors as _e
from storage import mutations as _m
from storage import results as _r


class CodecError(ValueError):
    """The bytes are not a valid encoding, or the object cannot be encoded."""


# --- the tag table: tag -> class, by hand, forever ----------------------------------------------

TAGS: Mapping[int, type] = types.MappingProxyType({
    # 1-15: shared values and errors
    1: _c.QueueKey,
    2: _c.Namespace,
    3: _c.MessageAttributeValue,
    4: _e.ErrorKind,
    5: _e.SqsError,
    # 16-47: mutations and snapshot records (35: MessagesRestored's column form, columnar.py)
    16: _m.MessageRecord,
    17: _m.MoveTaskRecord,
    18: _m.DedupEntry,
    19: _m.AttemptEntry,
    20: _m.QueueCreated,
    21: _m.QueueUpdated,
    22: _m.QueueDeleted,
    23: _m.TombstoneCleared,
    24: _m.QueuePurged,
    25: _m.MessageAdded,
    26: _m.MessageChanged,
    27: _m.MessageDeleted,
    28: _m.AttemptRecorded,
    29: _m.Pruned,
    30: _m.MoveTaskUpdated,
    31: _m.QueueRestored,
    32: _m.StorageRestored,
    33: _m.MessageRestored,
    34: _m.MessagesRestored,
    36: _m.OutboxEntry,
    37: _m.MessageOutboxed,
    38: _m.OutboxAccepted,
    39: _m.OutboxReturned,
    40: _m.OutboxCleared,
    41: _m.MoveAdopted,
    42: _m.MovesForgotten,
    43: _m.OutboxRestored,
    # 48-95: commands
    48: _c.CreateQueue,
    49: _c.DeleteQueue,
    50: _c.GetQueueUrl,
    51: _c.ListQueues,
    52: _c.GetQueueAttributes,
    53: _c.SetQueueAttributes,
    54: _c.PurgeQueue,
    55: _c.TagQueue,
    56: _c.UntagQueue,
    57: _c.ListQueueTags,
    58: _c.AddPermission,
    59: _c.RemovePermission,
    60: _c.ListDeadLetterSourceQueues,
    61: _c.SendMessage,
    62: _c.SendMessageBatchEntry,
    63: _c.SendMessageBatch,
    64: _c.ReceiveMessage,
    65: _c.DeleteMessage,
    66: _c.DeleteMessageBatchEntry,
    67: _c.DeleteMessageBatch,
    68: _c.ChangeMessageVisibility,
    69: _c.ChangeMessageVisibilityBatchEntry,
    70: _c.ChangeMessageVisibilityBatch,
    71: _c.StartMessageMoveTask,
    72: _c.CancelMessageMoveTask,
    73: _c.ListMessageMoveTasks,
    74: _c.Tick,
    75: _c.MovedMessage,
    76: _c.MoveItem,
    77: _c.AdoptMoved,
    78: _c.AcceptOutbox,
    79: _c.ReturnOutbox,
    80: _c.ClearOutbox,
    81: _c.ForgetMove,
    # 96-159: results
    96: _r.CreateQueueResult,
    97: _r.GetQueueUrlResult,
    98: _r.ListQueuesResult,
    99: _r.GetQueueAttributesResult,
    100: _r.ListQueueTagsResult,
    101: _r.ListDeadLetterSourceQueuesResult,
    102: _r.SendMessageResult,
    103: _r.BatchResultError,
    104: _r.SendMessageBatchResultEntry,
    105: _r.SendMessageBatchResult,
    106: _r.ReceivedMessage,
    107: _r.ReceiveMessageResult,
    108: _r.DeleteMessageBatchResult,
    109: _r.ChangeMessageVisibilityBatchResult,
    110: _r.StartMessageMoveTaskResult,
    111: _r.CancelMessageMoveTaskResult,
    112: _r.MessageMoveTaskInfo,
    113: _r.ListMessageMoveTasksResult,
    114: _r.TickResult,
    115: _r.MoveRefusal,
    116: _r.AdoptMovedResult,
})

# Tags of classes that were removed: never to be given to another class.
RETIRED_TAGS: frozenset[int] = frozenset()

_TAG_OF: dict[type, int] = {cls: tag for tag, cls in TAGS.items()}
if len(_TAG_OF) != len(TAGS):  # pragma: no cover - a table edit gone wrong
    raise RuntimeError("storage.codec: a class appears twice in TAGS")
if RETIRED_TAGS & TAGS.keys():  # pragma: no cover
    raise RuntimeError("storage.codec: a retired tag is in use")


def tag_of(cls: type) -> int:
    """The wire tag of a registered class (``KeyError`` if it is not registered)."""
    return _TAG_OF[cls]


# --- schema: per class, field names, hints, defaults ------------------------------------------

class _SqsErrorShape:
    """SqsError is an exception, not a dataclass; this stands in for its field list."""

    kind: _e.ErrorKind
    message: str


def _schema(cls: type) -> tuple[tuple[str, ...], dict[str, Any], int]:
    """(field names in order, resolved type hints, number of required leading fields)."""
    if cls is _e.SqsError:
        return ("kind", "message"), typing.get_type_hints(_SqsErrorShape), 2
    hints = typing.get_type_hints(cls, vars(sys.modules[cls.__module__]))
    if _is_struct(cls):
        names = cls.__struct_fields__
        return names, hints, len(names) - len(cls.__struct_defaults__)
    if not dataclasses.is_dataclass(cls):  # pragma: no cover
        raise TypeError(f"storage.codec: {cls!r} is neither a Struct nor a dataclass")
    fields = [f for f in dataclasses.fields(cls) if f.init]
    required = 0
    for f in fields:
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required += 1
        else:
            break
    return tuple(f.name for f in fields), hints, required


def _is_struct(cls: type) -> bool:
    """A msgspec Struct (storage's records): built by its constructor, in C, which is the
    cheapest way to store the values."""
    return isinstance(cls, type) and issubclass(cls, msgspec.Struct)


def _nested_class(hint: Any) -> type | None:
    """The registered class a field holds, if declared as exactly one (optionally or None)."""
    members = _union_members(hint) or (hint,)
    classes = [m for m in members if m in _TAG_OF]
    if len(classes) == 1 and all(m is _NoneType or m in _TAG_OF for m in members):
        return classes[0]
    return None


def _identifier(name: str) -> str:
    if not name.isidentifier():  # pragma: no cover - dataclass fields always are
        raise TypeError(f"storage.codec: field name {name!r} is not an identifier")
    return name


_NoneType = type(None)


def _union_members(hint: Any) -> tuple | None:
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(hint)
    return None
