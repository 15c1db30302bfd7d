"""Queue administration: create, delete, find, list, attributes, purge and tags.

A mixin of ``Storage`` (storage/engine.py): its handlers read the engine's state and emit
through ``_emit``, as every handler does. ListQueues lists every replication group's queues
(storage/catalogue.py), and the RedrivePolicy check of CreateQueue and SetQueueAttributes finds
its target in any group (redrive.py); everything else here reads this group's queues only.
"""

from __future__ import annotations

import base64
import binascii
import re
from itertools import chain
from typing import Iterable

from storage import validation as v
from storage.commands import (
    CreateQueue, DeleteQueue, GetQueueAttributes, GetQueueUrl, ListQueues, ListQueueTags, Namespace, PurgeQueue,
    SetQueueAttributes, TagQueue, UntagQueue,
)
from storage.errors import (
    INVALID_ATTRIBUTE_NAME, INVALID_PARAMETER_VALUE, PURGE_QUEUE_IN_PROGRESS, QUEUE_DELETED_RECENTLY,
    QUEUE_NAME_EXISTS, invalid_parameter, missing_parameter, queue_does_not_exist,
)
from storage.keys import key_names
from storage.mutations import QueueCreated, QueueDeleted, QueuePurged, QueueUpdated
from storage.queue_config import ALL_NAMES, COMPUTED, FIFO_ONLY, invalid_value, sse_conflict, validate, with_defaults
from storage.results import (
    CreateQueueResult, GetQueueAttributesResult, GetQueueUrlResult, ListQueuesResult, ListQueueTagsResult,
)

QUEUE_TOMBSTONE_MS = 60_000
PURGE_INTERVAL_MS = 60_000
REMOVABLE_ATTRIBUTES = frozenset(("Policy", "RedrivePolicy", "RedriveAllowPolicy", "KmsMasterKeyId"))
_NAME_RE = re.compile(r"[A-Za-z0-9_-]+")


def _token(payload: str) -> str:
    return base64.urlsafe_b64encode(b"v1:" + payload.encode()).decode()


def _untoken(token: str) -> str:
    try:
        raw = base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raw = ""
    if not raw.startswith("v1:"):
        raise INVALID_PARAMETER_VALUE("Invalid NextToken value.")
    return raw[3:]


class QueueActions:
    """CreateQueue, DeleteQueue, GetQueueUrl, ListQueues, Get/SetQueueAttributes, PurgeQueue,
    TagQueue, UntagQueue and ListQueueTags."""

    def _check_tags(self, tags: dict[str, str]) -> None:
        for k, val in tags.items():
            if not isinstance(k, str) or not 1 <= len(k) <= 128:
                raise invalid_parameter("Tag.Key", k, "Tag keys must be between 1 and 128 characters")
            if k.lower().startswith("aws:"):
                raise invalid_parameter("Tag.Key", k, "Tag keys must not start with aws:")
            if not isinstance(val, str) or len(val) > 256:
                raise invalid_parameter("Tag.Value", val, "Tag values must be at most 256 characters")
        if len(tags) > self.limits.max_tags:
            raise INVALID_PARAMETER_VALUE(
                f"Too many tags: a queue can have at most {self.limits.max_tags} tags.")

    def _create_queue(self, c: CreateQueue, now: int, out: list) -> CreateQueueResult:
        name = c.name
        if not name:
            raise missing_parameter("QueueName")
        attrs_in = dict(c.attributes or {})
        fifo = str(attrs_in.get("FifoQueue", "false")).lower() == "true"
        fifo_name = name.endswith(".fifo")
        base = name[:-5] if fifo_name else name
        name_ok = len(name) <= self.limits.max_queue_name_length and bool(_NAME_RE.fullmatch(base))
        if fifo and not (fifo_name and name_ok):
            raise INVALID_PARAMETER_VALUE(
                "The name of a FIFO queue can only include alphanumeric characters, hyphens, or "
                "underscores, must end with .fifo suffix and be 1 to 80 in length.")
        if not fifo and (fifo_name or not name_ok):
            raise INVALID_PARAMETER_VALUE(
                "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
        attrs = validate(attrs_in, fifo=fifo, creating=True, limits=self.limits)
        tags = dict(c.tags or {})
        self._check_tags(tags)
        key = c.ns.key(name)
        q = self._by_key.get(key_names(key))
        if q is not None:
            for attr_name, value in attrs.items():
                if q.attributes.get(attr_name) != value:
                    raise QUEUE_NAME_EXISTS(
                        f"A queue already exists with the same name and a different value for "
                        f"attribute {attr_name}")
            return CreateQueueResult(key)
        deleted = self._tombstones.get(key)
        if deleted is not None and now - deleted < QUEUE_TOMBSTONE_MS:
            # LocalStack's AWS-validated test_create_queue_recently_deleted.
            raise QUEUE_DELETED_RECENTLY(
                "You must wait 60 seconds after deleting a queue before you can create another "
                "with the same name.")
        full = with_defaults(attrs, fifo)
        if full.get("DeduplicationScope") == "queue" and full.get("FifoThroughputLimit") == "perMessageGroupId":
            raise invalid_value("FifoThroughputLimit",
                                "FifoThroughputLimit perMessageGroupId requires DeduplicationScope messageGroup.")
        self._check_redrive(key, fifo, attrs)
        self._emit(out, QueueCreated(self._next_qid, key, now, full, tags))
        return CreateQueueResult(key)

    def _delete_queue(self, c: DeleteQueue, now: int, out: list) -> None:
        q = self._queue(c.queue)
        self._emit(out, QueueDeleted(q.qid, q.key, now))

    def _get_queue_url(self, c: GetQueueUrl, now: int, out: list) -> GetQueueUrlResult:
        if not c.name:
            raise missing_parameter("QueueName")
        ns = Namespace(c.ns.region, c.owner_account or c.ns.account)
        key = ns.key(c.name)
        if key_names(key) not in self._by_key:
            raise queue_does_not_exist()
        return GetQueueUrlResult(key)

    def _page(self, names: list[str], max_results: int | None, next_token: str | None,
              default_all: int = 1000) -> tuple[list[str], str | None]:
        if max_results is not None:
            v.check_int_range("MaxResults", max_results, 1, 1000, "MaxResults must be an integer between 1 and 1000")
        names.sort()
        start = 0
        if next_token:
            after = _untoken(next_token)
            start = next((i for i, n in enumerate(names) if n > after), len(names))
        if max_results is None:
            return names[start:start + default_all], None
        page = names[start:start + max_results]
        more = start + max_results < len(names)
        return page, (_token(page[-1]) if more and page else None)

    def _list_queues(self, c: ListQueues, now: int, out: list) -> ListQueuesResult:
        prefix = c.prefix or ""
        keys: Iterable[tuple[str, str, str]] = self._by_key
        if self.catalogue is not None:
            # every group's names are merged before paging, so a NextToken (the last name of a
            # page) resumes the walk over all of them; a key lives in one group, so none repeats
            keys = chain(keys, (key_names(q.key) for q in self.catalogue.queues()))
        names = [name for region, account, name in keys
                 if region == c.ns.region and account == c.ns.account and name.startswith(prefix)]
        page, token = self._page(names, c.max_results, c.next_token)
        return ListQueuesResult(tuple(c.ns.key(n) for n in page), token)

    def _get_queue_attributes(self, c: GetQueueAttributes, now: int, out: list) -> GetQueueAttributesResult:
        q = self._queue(c.queue)
        names = c.attribute_names or ()
        for n in names:
            if n != "All" and n not in ALL_NAMES:
                raise INVALID_ATTRIBUTE_NAME(f"Unknown Attribute {n}.")
        wanted = set(ALL_NAMES) if "All" in names else set(names)
        result: dict[str, str] = {}
        kms = bool(q.attributes.get("KmsMasterKeyId"))
        for n, val in q.attributes.items():
            # The data key reuse period means nothing without a KMS key, and AWS lists it only
            # with one (LocalStack's AWS-validated test_set_queue_attributes_default_values).
            if n in wanted and (kms or n != "KmsDataKeyReusePeriodSeconds"):
                result[n] = val
        if wanted & set(COMPUTED):
            visible, inflight, delayed = q.stats(now)
            computed = {
                "ApproximateNumberOfMessages": str(visible),
                "ApproximateNumberOfMessagesNotVisible": str(inflight),
                "ApproximateNumberOfMessagesDelayed": str(delayed),
                "CreatedTimestamp": str(q.created_ms // 1000),
                "LastModifiedTimestamp": str(q.modified_ms // 1000),
                "QueueArn": q.arn,
            }
            for n, val in computed.items():
                if n in wanted:
                    result[n] = val
        return GetQueueAttributesResult(result)

    def _set_queue_attributes(self, c: SetQueueAttributes, now: int, out: list) -> None:
        q = self._queue(c.queue)
        if not c.attributes:
            raise missing_parameter("Attributes")
        given = dict(c.attributes)
        removed = {n for n, val in given.items() if n in REMOVABLE_ATTRIBUTES and val == ""}
        for n in removed:
            del given[n]
        for n in removed:
            if n in FIFO_ONLY and not q.fifo:
                raise INVALID_ATTRIBUTE_NAME(f"Unknown Attribute {n}.")
        attrs = validate(given, fifo=q.fifo, creating=False, limits=self.limits)
        merged = {n: val for n, val in q.attributes.items() if n not in removed}
        merged.update(attrs)
        if merged.get("KmsMasterKeyId") and merged.get("SqsManagedSseEnabled") == "true":
            if "SqsManagedSseEnabled" in attrs:
                raise sse_conflict()
            merged["SqsManagedSseEnabled"] = "false"
        if merged.get("DeduplicationScope") == "queue" and merged.get("FifoThroughputLimit") == "perMessageGroupId":
            raise invalid_value("FifoThroughputLimit",
                                "FifoThroughputLimit perMessageGroupId requires DeduplicationScope messageGroup.")
        if "RedrivePolicy" in attrs:
            self._check_redrive(q.key, q.fifo, attrs)
        self._emit(out, QueueUpdated(q.qid, q.version + 1, now, merged, q.tags))

    def _purge_queue(self, c: PurgeQueue, now: int, out: list) -> None:
        q = self._queue(c.queue)
        if q.last_purge_ms >= 0 and now - q.last_purge_ms < PURGE_INTERVAL_MS:
            raise PURGE_QUEUE_IN_PROGRESS(
                f"Only one PurgeQueue operation on {q.key.name} is allowed every 60 seconds.")
        self._emit(out, QueuePurged(q.qid, q.next_serial, now))

    def _tag_queue(self, c: TagQueue, now: int, out: list) -> None:
        q = self._queue(c.queue)
        if not c.tags:
            raise missing_parameter("Tags")
        tags = {**q.tags, **c.tags}
        self._check_tags(tags)
        self._emit(out, QueueUpdated(q.qid, q.version + 1, q.modified_ms, q.attributes, tags))

    def _untag_queue(self, c: UntagQueue, now: int, out: list) -> None:
        q = self._queue(c.queue)
        if not c.tag_keys:
            raise missing_parameter("TagKeys")
        tags = {k: val for k, val in q.tags.items() if k not in set(c.tag_keys)}
        if tags != q.tags:
            self._emit(out, QueueUpdated(q.qid, q.version + 1, q.modified_ms, q.attributes, tags))

    def _list_queue_tags(self, c: ListQueueTags, now: int, out: list) -> ListQueueTagsResult:
        return ListQueueTagsResult(dict(self._queue(c.queue).tags))
