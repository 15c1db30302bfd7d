"""Queue administration (storage/queue_actions.py): names, idempotence, DeleteQueue, GetQueueUrl,
ListQueues, PurgeQueue, tags, the limits profiles, and the replication of queue-level changes.

The ``sqs`` harness (tests/storage/queue_env.py) checks each command's result, the state later
commands see, the mutations emitted, and that a rejected command leaves no trace.
"""

from __future__ import annotations

import pytest

from storage import RELAXED, STRICT
from storage import errors
from storage.commands import (
    AddPermission, CreateQueue, DeleteQueue, GetQueueAttributes, GetQueueUrl, ListQueueTags, ListQueues,
    Namespace, PurgeQueue, QueueKey, ReceiveMessage, SendMessage, SetQueueAttributes, TagQueue, Tick,
    UntagQueue,
)
from storage.mutations import QueueCreated, QueueDeleted, QueuePurged, QueueUpdated, TombstoneCleared
from storage.results import GetQueueUrlResult
from tests.storage.queue_env import (
    INVALID_ATTRIBUTE_NAME, INVALID_PARAMETER_VALUE, MISSING_PARAMETER, NONEXISTENT, NS, OTHER_ACCOUNT,
    OTHER_REGION, PURGE_IN_PROGRESS, QUEUE_ALREADY_EXISTS, QUEUE_DELETED_RECENTLY, START_MS, Sqs, fifo, kinds,
    redrive, walk,
)


# =============================================================================================
# CreateQueue: names
# =============================================================================================

@pytest.mark.parametrize("name", [
    "q", "a" * 80, "My_Queue-1", "UPPER", "0123456789", "-_-",
])
def test_create_standard_queue_accepts_valid_names(sqs, name):
    key = sqs.create(name)
    assert key == QueueKey(NS.region, NS.account, name)
    assert kinds(sqs.last) == [QueueCreated]
    created = sqs.last[0]
    assert created.key == key and created.created_ms == START_MS
    assert sqs.list_names() == [name]
    sqs.assert_converged()


@pytest.mark.parametrize("name", [
    "a" * 81,            # one past the 80-character limit
    "has space",
    "dot.in.name",
    "slash/name",
    "bang!",
    "ünicode",
    "tab\tname",
    "star*",
])
def test_create_standard_queue_rejects_invalid_names(sqs, name):
    sqs.fail(CreateQueue(NS, name), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


def test_create_queue_without_name_is_missing_parameter(sqs):
    sqs.fail(CreateQueue(NS, None), MISSING_PARAMETER)


@pytest.mark.parametrize("name", ["f.fifo", "a" * 75 + ".fifo", "Orders_v2-eu.fifo"])
def test_create_fifo_queue_accepts_valid_names(sqs, name):
    assert len(name) <= 80
    key = sqs.create(name, fifo())
    assert key.is_fifo
    assert sqs.attrs(key, "FifoQueue") == {"FifoQueue": "true"}
    assert kinds(sqs.last) == []
    sqs.assert_converged()


@pytest.mark.parametrize("name", [
    "a" * 76 + ".fifo",   # 81 characters: the .fifo suffix counts toward the 80
    "nofifosuffix",       # FifoQueue=true needs the suffix
    ".fifo",              # nothing before the suffix
    "bad name.fifo",
    "two.dots.fifo",
    "x.FIFO",             # the suffix is lower case
])
def test_create_fifo_queue_rejects_invalid_names(sqs, name):
    sqs.fail(CreateQueue(NS, name, fifo()), INVALID_PARAMETER_VALUE)


def test_fifo_suffix_without_fifo_attribute_is_rejected(sqs):
    # A standard queue cannot be named *.fifo: AWS requires FifoQueue=true for such a name.
    sqs.fail(CreateQueue(NS, "orders.fifo"), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


def test_fifo_queue_false_on_standard_queue_is_unknown_attribute(sqs):
    # Captured from AWS (aws/aws-sdk-php#1331): "InvalidAttributeName (client): Unknown Attribute
    # FifoQueue." for CreateQueue(bar_queue, FifoQueue=false).
    sqs.fail(CreateQueue(NS, "bar_queue", {"FifoQueue": "false"}), INVALID_ATTRIBUTE_NAME)


def test_queue_names_are_case_sensitive(sqs):
    lower = sqs.create("orders")
    upper = sqs.create("Orders")
    assert lower != upper
    assert kinds(sqs.last) == [QueueCreated]
    assert sorted(sqs.list_names()) == ["Orders", "orders"]


# =============================================================================================
# CreateQueue: idempotence and conflicts
# =============================================================================================

def test_create_is_idempotent_with_same_attributes(sqs):
    attrs = {"VisibilityTimeout": "45", "DelaySeconds": "5"}
    key = sqs.create("jobs", attrs)
    created_at = sqs.attrs(key, "CreatedTimestamp")
    sqs.clock.advance(5_000)
    digest = sqs.master.digest()
    again = sqs.create("jobs", attrs)
    assert again == key
    assert sqs.last == []
    assert sqs.master.digest() == digest
    assert sqs.attrs(key, "CreatedTimestamp") == created_at
    sqs.assert_converged()


def test_create_is_idempotent_without_attributes(sqs):
    key = sqs.create("plain")
    assert sqs.create("plain") == key
    assert sqs.last == []


def test_create_is_idempotent_for_fifo_queue(sqs):
    key = sqs.create("o.fifo", fifo({"ContentBasedDeduplication": "true"}))
    assert sqs.create("o.fifo", fifo({"ContentBasedDeduplication": "true"})) == key
    assert sqs.last == []


def test_create_keeps_existing_messages_when_idempotent(sqs):
    key = sqs.create("keep")
    sqs.send(key, "one")
    sqs.create("keep")
    assert sqs.counts(key) == (1, 0, 0)


@pytest.mark.parametrize("first,second", [
    ({"VisibilityTimeout": "30"}, {"VisibilityTimeout": "60"}),
    ({"VisibilityTimeout": "60"}, {"VisibilityTimeout": "30"}),     # 30 is the default, still differs
    ({}, {"DelaySeconds": "10"}),
    ({"MessageRetentionPeriod": "600"}, {"MessageRetentionPeriod": "601"}),
])
def test_create_with_different_attribute_is_queue_already_exists(sqs, first, second):
    key = sqs.create("dup", first)
    before = sqs.attrs(key)
    sqs.fail(CreateQueue(NS, "dup", second), QUEUE_ALREADY_EXISTS)
    assert sqs.attrs(key) == before


def test_same_name_in_other_namespace_is_a_different_queue(sqs):
    a = sqs.create("shared", {"VisibilityTimeout": "10"})
    b = sqs.create("shared", {"VisibilityTimeout": "20"}, ns=OTHER_REGION)
    c = sqs.create("shared", {"VisibilityTimeout": "30"}, ns=OTHER_ACCOUNT)
    assert len({a, b, c}) == 3
    assert sqs.attrs(b, "VisibilityTimeout") == {"VisibilityTimeout": "20"}
    assert sqs.attrs(b, "QueueArn")["QueueArn"] == "arn:aws:sqs:eu-west-1:000000000000:shared"
    assert sqs.attrs(c, "QueueArn")["QueueArn"] == "arn:aws:sqs:us-east-1:111111111111:shared"


# =============================================================================================
# CreateQueue: tags
# =============================================================================================

def test_create_with_tags(sqs):
    key = sqs.create("tagged", tags={"env": "prod", "team": "core", "empty": ""})
    assert sqs.tags(key) == {"env": "prod", "team": "core", "empty": ""}


def test_create_without_tags_has_none(sqs):
    assert sqs.tags(sqs.create("untagged")) == {}


@pytest.mark.parametrize("tags", [
    {f"k{i}": "v" for i in range(51)},
    {"": "v"},
    {"k" * 129: "v"},
    {"aws:reserved": "v"},
    {"k": "v" * 257},
])
def test_create_with_bad_tags_is_rejected(sqs, tags):
    sqs.fail(CreateQueue(NS, "q", {}, tags), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


def test_create_with_tag_limits_at_the_edge(sqs):
    tags = {f"k{i}": "v" for i in range(48)}
    tags["k" * 128] = "v" * 256
    tags["x"] = ""
    assert len(tags) == 50
    key = sqs.create("edge", tags=tags)
    assert sqs.tags(key) == tags


# =============================================================================================
# DeleteQueue and QueueDeletedRecently
# =============================================================================================

def test_delete_queue(sqs):
    key = sqs.create("doomed")
    keep = sqs.create("kept")
    sqs.send(key, "bye")
    assert sqs.run(DeleteQueue(key)) is None
    assert kinds(sqs.last) == [QueueDeleted]
    assert sqs.last[0].key == key and sqs.last[0].deleted_ms == START_MS
    assert sqs.list_names() == ["kept"]
    sqs.fail(GetQueueUrl(NS, "doomed"), NONEXISTENT)
    sqs.fail(GetQueueAttributes(key, ("All",)), NONEXISTENT)
    sqs.fail(SendMessage(key, "x"), NONEXISTENT)
    sqs.fail(ReceiveMessage(key), NONEXISTENT)
    assert sqs.counts(keep) == (0, 0, 0)
    sqs.assert_converged()


def test_delete_nonexistent_queue(sqs):
    sqs.fail(DeleteQueue(NS.key("never")), NONEXISTENT)


def test_delete_twice(sqs):
    key = sqs.create("once")
    sqs.run(DeleteQueue(key))
    sqs.fail(DeleteQueue(key), NONEXISTENT)


def test_recreate_within_60_seconds_is_queue_deleted_recently(sqs):
    key = sqs.create("phoenix")
    sqs.run(DeleteQueue(key))
    sqs.clock.advance(59_999)
    err = sqs.fail(CreateQueue(NS, "phoenix"), QUEUE_DELETED_RECENTLY)
    # LocalStack's AWS-validated test_create_queue_recently_deleted.
    assert err.message == ("You must wait 60 seconds after deleting a queue before you can create "
                           "another with the same name.")
    sqs.fail(GetQueueUrl(NS, "phoenix"), NONEXISTENT)
    assert sqs.list_names() == []


def test_recreate_after_tick_past_60_seconds(sqs):
    key = sqs.create("phoenix", {"VisibilityTimeout": "99"}, {"old": "tag"})
    sqs.send(key, "old message")
    sqs.run(DeleteQueue(key))
    sqs.clock.advance(30_000)
    sqs.run(Tick())
    assert TombstoneCleared not in kinds(sqs.last)
    sqs.clock.advance(30_000)
    sqs.run(Tick())
    assert kinds(sqs.last) == [TombstoneCleared]
    assert sqs.last[0].key == key
    again = sqs.create("phoenix")
    assert again == key
    assert kinds(sqs.last) == [QueueCreated]
    # a fresh queue: no old messages, attributes, tags or timestamps
    attrs = sqs.attrs(again)
    assert attrs["VisibilityTimeout"] == "30"
    assert attrs["CreatedTimestamp"] == str((START_MS + 60_000) // 1000)
    assert sqs.counts(again) == (0, 0, 0)
    assert sqs.receive(again) == ()
    assert sqs.tags(again) == {}
    sqs.assert_converged()


def test_deleted_recently_is_per_namespace(sqs):
    sqs.run(DeleteQueue(sqs.create("name")))
    sqs.fail(CreateQueue(NS, "name"), QUEUE_DELETED_RECENTLY)
    assert sqs.create("name", ns=OTHER_ACCOUNT) == OTHER_ACCOUNT.key("name")
    assert sqs.create("name", ns=OTHER_REGION) == OTHER_REGION.key("name")


# =============================================================================================
# GetQueueUrl
# =============================================================================================

def test_get_queue_url(sqs):
    key = sqs.create("findme")
    result = sqs.run(GetQueueUrl(NS, "findme"))
    assert isinstance(result, GetQueueUrlResult)
    assert result.queue == key
    assert sqs.last == []


def test_get_queue_url_missing_name(sqs):
    sqs.fail(GetQueueUrl(NS, None), MISSING_PARAMETER)


def test_get_queue_url_nonexistent(sqs):
    sqs.create("other")
    sqs.fail(GetQueueUrl(NS, "nope"), NONEXISTENT)
    sqs.fail(GetQueueUrl(NS, "OTHER"), NONEXISTENT)   # names are case-sensitive


def test_get_queue_url_with_owner_account(sqs):
    foreign = sqs.create("theirs", ns=OTHER_ACCOUNT)
    assert sqs.run(GetQueueUrl(NS, "theirs", owner_account=OTHER_ACCOUNT.account)).queue == foreign
    sqs.fail(GetQueueUrl(NS, "theirs"), NONEXISTENT)
    sqs.fail(GetQueueUrl(NS, "theirs", owner_account="222222222222"), NONEXISTENT)


def test_get_queue_url_is_per_region(sqs):
    sqs.create("regional", ns=OTHER_REGION)
    sqs.fail(GetQueueUrl(NS, "regional"), NONEXISTENT)
    assert sqs.run(GetQueueUrl(OTHER_REGION, "regional")).queue == OTHER_REGION.key("regional")


# =============================================================================================
# ListQueues
# =============================================================================================

def test_list_queues_empty(sqs):
    assert sqs.list_names() == []


def test_list_queues_with_prefix(sqs):
    for name in ("orders-eu", "orders-us", "order", "payments", "Orders-caps"):
        sqs.create(name)
    assert sorted(sqs.list_names(prefix="orders")) == ["orders-eu", "orders-us"]
    assert sorted(sqs.list_names(prefix="order")) == ["order", "orders-eu", "orders-us"]
    assert sqs.list_names(prefix="zzz") == []
    assert len(sqs.list_names()) == 5
    assert sqs.last == []


@pytest.mark.parametrize("max_results", [0, -1, 1001])
def test_list_queues_max_results_out_of_range(sqs, max_results):
    sqs.create("q")
    sqs.fail(ListQueues(NS, max_results=max_results), INVALID_PARAMETER_VALUE)


@pytest.mark.parametrize("max_results", [1, 1000])
def test_list_queues_max_results_edges(sqs, max_results):
    sqs.create("a")
    sqs.create("b")
    result = sqs.run(ListQueues(NS, max_results=max_results))
    assert len(result.queues) == min(2, max_results)
    assert (result.next_token is None) == (max_results >= 2)


@pytest.mark.parametrize("page_size", [1, 3, 4, 7, 12, 13])
def test_list_queues_pagination_walks_every_queue_once(sqs, page_size):
    names = [f"q{i:02d}" for i in range(12)]
    for name in reversed(names):
        sqs.create(name)
    sqs.create("other-prefix")
    pages = walk(sqs, lambda token: ListQueues(NS, "q", page_size, token))
    seen = [n for page in pages for n in page]
    assert sorted(seen) == names
    assert len(seen) == len(set(seen))
    assert all(0 < len(page) <= page_size for page in pages)
    assert len(pages) == max(1, -(-len(names) // page_size))


def test_list_queues_pagination_survives_deletes_between_pages(sqs):
    names = [f"q{i}" for i in range(9)]
    for name in names:
        sqs.create(name)
    first = sqs.run(ListQueues(NS, max_results=3))
    listed = [k.name for k in first.queues]
    sqs.run(DeleteQueue(first.queues[0]))      # an already-listed queue goes away
    rest = walk(sqs, lambda token: ListQueues(NS, None, 3, token or first.next_token))
    seen = listed + [n for page in rest for n in page]
    assert sorted(seen) == names
    assert len(seen) == len(set(seen))


def test_list_queues_without_max_results_returns_at_most_1000(sqs):
    # AWS API reference, ListQueues: "returns a list of your queues ... The maximum number of
    # queues that can be returned is 1,000."
    for i in range(1001):
        sqs.create(f"q{i:04d}")
    result = sqs.run(ListQueues(NS))
    assert len(result.queues) == 1000
    assert result.next_token is None


@pytest.mark.parametrize("token", ["garbage", "!!!", "djE=x"])
def test_list_queues_invalid_next_token(sqs, token):
    sqs.create("q")
    sqs.fail(ListQueues(NS, max_results=1, next_token=token), INVALID_PARAMETER_VALUE)


def test_list_queues_namespaces_are_separate(sqs):
    sqs.create("home")
    sqs.create("abroad", ns=OTHER_REGION)
    sqs.create("theirs", ns=OTHER_ACCOUNT)
    assert sqs.list_names(NS) == ["home"]
    assert sqs.list_names(OTHER_REGION) == ["abroad"]
    assert sqs.list_names(OTHER_ACCOUNT) == ["theirs"]
    assert sqs.list_names(Namespace("ap-south-1", "000000000000")) == []
    result = sqs.run(ListQueues(OTHER_REGION))
    assert result.queues == (OTHER_REGION.key("abroad"),)


# =============================================================================================
# PurgeQueue
# =============================================================================================

def test_purge_removes_every_message(sqs):
    key = sqs.create("p")
    for i in range(5):
        sqs.send(key, f"m{i}")
    sqs.send(key, "delayed", delay_seconds=60)
    sqs.receive(key, 2)
    assert sqs.counts(key) == (3, 2, 1)
    assert sqs.run(PurgeQueue(key)) is None
    assert kinds(sqs.last) == [QueuePurged]
    assert sqs.counts(key) == (0, 0, 0)
    sqs.clock.advance(120_000)                 # nothing comes back: not the delayed, not the in-flight
    assert sqs.receive(key) == ()
    assert sqs.counts(key) == (0, 0, 0)
    sqs.assert_converged()


def test_second_purge_within_60_seconds_is_in_progress(sqs):
    key = sqs.create("p")
    sqs.run(PurgeQueue(key))
    sqs.clock.advance(59_999)
    err = sqs.fail(PurgeQueue(key), PURGE_IN_PROGRESS, status=403)
    assert err.status == 403


def test_purge_again_after_60_seconds(sqs):
    key = sqs.create("p")
    sqs.run(PurgeQueue(key))
    sqs.send(key, "after first purge")
    sqs.clock.advance(60_000)
    sqs.run(PurgeQueue(key))
    assert kinds(sqs.last) == [QueuePurged]
    assert sqs.counts(key) == (0, 0, 0)


def test_messages_sent_after_a_purge_survive(sqs):
    key = sqs.create("p")
    sqs.send(key, "before")
    sqs.run(PurgeQueue(key))
    sqs.send(key, "after")
    sqs.clock.advance(10_000)
    sqs.fail(PurgeQueue(key), PURGE_IN_PROGRESS, status=403)   # a rejected purge deletes nothing
    assert [m.body for m in sqs.receive(key)] == ["after"]
    sqs.assert_converged()


def test_purge_is_per_queue(sqs):
    a = sqs.create("a")
    b = sqs.create("b")
    sqs.send(a)
    sqs.send(b)
    sqs.run(PurgeQueue(a))
    sqs.run(PurgeQueue(b))                     # b's own 60 s window, unaffected by a's purge
    sqs.send(b, "kept")
    assert sqs.counts(a) == (0, 0, 0)
    assert sqs.counts(b) == (1, 0, 0)


def test_purge_nonexistent_queue(sqs):
    sqs.fail(PurgeQueue(NS.key("ghost")), NONEXISTENT)


def test_purge_fifo_queue(sqs):
    key = sqs.create("p.fifo", fifo({"ContentBasedDeduplication": "true"}))
    sqs.send(key, "a", group_id="g")
    sqs.send(key, "b", group_id="g")
    sqs.receive(key, 1)
    sqs.run(PurgeQueue(key))
    assert sqs.counts(key) == (0, 0, 0)
    sqs.send(key, "c", group_id="g")
    assert [m.body for m in sqs.receive(key)] == ["c"]   # the group is not left blocked


# =============================================================================================
# TagQueue / UntagQueue / ListQueueTags
# =============================================================================================

def test_tag_untag_and_list(sqs):
    key = sqs.create("t", tags={"a": "1"})
    sqs.run(TagQueue(key, {"b": "2", "a": "overwritten"}))
    assert kinds(sqs.last) == [QueueUpdated]
    assert sqs.tags(key) == {"a": "overwritten", "b": "2"}
    sqs.run(UntagQueue(key, ("a", "not-there")))
    assert kinds(sqs.last) == [QueueUpdated]
    assert sqs.tags(key) == {"b": "2"}
    sqs.run(ListQueueTags(key))
    assert sqs.last == []
    sqs.assert_converged()


def test_untag_unknown_keys_changes_nothing(sqs):
    key = sqs.create("t", tags={"keep": "me"})
    digest = sqs.master.digest()
    sqs.run(UntagQueue(key, ("nope",)))
    assert sqs.master.digest() == digest
    assert sqs.tags(key) == {"keep": "me"}


def test_tags_do_not_change_attributes(sqs):
    key = sqs.create("t", {"VisibilityTimeout": "77"})
    before = sqs.attrs(key, "VisibilityTimeout", "DelaySeconds")
    sqs.run(TagQueue(key, {"x": "y"}))
    assert sqs.attrs(key, "VisibilityTimeout", "DelaySeconds") == before


def test_tag_up_to_50_tags(sqs):
    key = sqs.create("t", tags={f"k{i}": "v" for i in range(40)})
    sqs.run(TagQueue(key, {f"n{i}": "v" for i in range(10)}))
    assert len(sqs.tags(key)) == 50
    sqs.run(TagQueue(key, {"k0": "replaced"}))            # overwriting does not add a tag
    assert len(sqs.tags(key)) == 50


def test_tag_beyond_50_tags_is_rejected(sqs):
    key = sqs.create("t", tags={f"k{i}": "v" for i in range(40)})
    before = sqs.tags(key)
    sqs.fail(TagQueue(key, {f"n{i}": "v" for i in range(11)}), INVALID_PARAMETER_VALUE)
    assert sqs.tags(key) == before


@pytest.mark.parametrize("tags", [
    {"": "v"},
    {"k" * 129: "v"},
    {"k": "v" * 257},
    {"aws:owner": "me"},
    {"ok": "v", "aws:bad": "v"},
])
def test_tag_with_bad_key_or_value(sqs, tags):
    key = sqs.create("t")
    sqs.fail(TagQueue(key, tags), INVALID_PARAMETER_VALUE)
    assert sqs.tags(key) == {}


def test_tag_key_and_value_edges(sqs):
    key = sqs.create("t")
    sqs.run(TagQueue(key, {"k" * 128: "v" * 256, "z": ""}))
    assert sqs.tags(key) == {"k" * 128: "v" * 256, "z": ""}


@pytest.mark.parametrize("tags", [None, {}])
def test_tag_without_tags_is_missing_parameter(sqs, tags):
    key = sqs.create("t")
    sqs.fail(TagQueue(key, tags), MISSING_PARAMETER)


def test_untag_without_keys_is_missing_parameter(sqs):
    key = sqs.create("t", tags={"a": "1"})
    sqs.fail(UntagQueue(key, None), MISSING_PARAMETER)
    assert sqs.tags(key) == {"a": "1"}


@pytest.mark.parametrize("command", [
    TagQueue(NS.key("ghost"), {"a": "1"}),
    UntagQueue(NS.key("ghost"), ("a",)),
    ListQueueTags(NS.key("ghost")),
])
def test_tag_actions_on_nonexistent_queue(sqs, command):
    sqs.fail(command, NONEXISTENT)


# =============================================================================================
# Limits profiles
# =============================================================================================

def test_relaxed_limits_allow_longer_queue_names():
    long_name = "n" * 120
    strict = Sqs(STRICT)
    strict.fail(CreateQueue(NS, long_name), INVALID_PARAMETER_VALUE)
    relaxed = Sqs(RELAXED)
    key = relaxed.create(long_name)
    assert relaxed.list_names() == [long_name]
    fifo_name = "f" * 100 + ".fifo"
    strict.fail(CreateQueue(NS, fifo_name, fifo()), INVALID_PARAMETER_VALUE)
    assert relaxed.create(fifo_name, fifo()).is_fifo
    assert relaxed.attrs(key, "QueueArn")["QueueArn"].endswith(":" + long_name)


def test_relaxed_limits_keep_the_name_alphabet():
    relaxed = Sqs(RELAXED)
    relaxed.fail(CreateQueue(NS, "no spaces"), INVALID_PARAMETER_VALUE)
    relaxed.fail(CreateQueue(NS, "n" * (RELAXED.max_queue_name_length + 1)), INVALID_PARAMETER_VALUE)
    relaxed.fail(CreateQueue(NS, "x.fifo"), INVALID_PARAMETER_VALUE)


# =============================================================================================
# Replication of queue-level changes
# =============================================================================================

def test_replica_follows_every_queue_level_change(sqs):
    dlq = sqs.create("dlq", tags={"a": "1"})
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq)})
    sqs.create("gone")
    sqs.run(DeleteQueue(NS.key("gone")))
    sqs.run(SetQueueAttributes(src, {"VisibilityTimeout": "3"}))
    sqs.run(TagQueue(src, {"x": "y"}))
    sqs.run(UntagQueue(dlq, ("a",)))
    sqs.run(AddPermission(src, "p", ("111122223333",), ("SendMessage",)))
    sqs.send(src)
    sqs.run(PurgeQueue(src))
    sqs.clock.advance(61_000)
    sqs.run(Tick())
    sqs.assert_converged()
    assert {type(m) for m in sqs.emitted} >= {
        QueueCreated, QueueDeleted, QueueUpdated, QueuePurged, TombstoneCleared}
    for key in (dlq, src):
        assert dict(sqs.replica.execute(GetQueueAttributes(key, ("All",)))[0].attributes) == sqs.attrs(key)
        assert dict(sqs.replica.execute(ListQueueTags(key))[0].tags) == sqs.tags(key)
    # applying everything a second time changes nothing
    digest = sqs.replica.digest()
    for m in sqs.emitted:
        sqs.replica.apply(m)
    assert sqs.replica.digest() == digest


def test_error_kinds_match_botocore_model():
    assert errors.QUEUE_NAME_EXISTS.query_code == QUEUE_ALREADY_EXISTS
    assert errors.PURGE_QUEUE_IN_PROGRESS.status == 403
    assert errors.OVER_LIMIT.status == 403
    assert errors.QUEUE_DOES_NOT_EXIST.query_code == NONEXISTENT
