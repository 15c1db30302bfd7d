"""Dead-letter queues (storage/redrive.py): RedrivePolicy and RedriveAllowPolicy across queues,
ListDeadLetterSourceQueues, the move on receive, and message move tasks.

Queue-level tests use the ``sqs`` harness (tests/storage/queue_env.py), message-level ones the
``env`` harness (tests/storage/message_env.py).
"""

from __future__ import annotations

import json

import pytest

from storage.commands import (
    CancelMessageMoveTask, CreateQueue, DeleteQueue, ListDeadLetterSourceQueues, ListMessageMoveTasks,
    QueueKey, SetQueueAttributes, StartMessageMoveTask,
)
from storage.mutations import MessageAdded, MessageDeleted, MoveTaskUpdated, QueueUpdated
from storage.results import ListDeadLetterSourceQueuesResult
from tests.storage.message_env import RESOURCE_NOT_FOUND, S, Env, fifo_send
from tests.storage.queue_env import (
    INVALID_ATTRIBUTE_VALUE, INVALID_PARAMETER_VALUE, MISSING_PARAMETER, NONEXISTENT, NS, OTHER_ACCOUNT, fifo,
    kinds, redrive,
)


# =============================================================================================
# CreateQueue / SetQueueAttributes: RedrivePolicy and RedriveAllowPolicy
# =============================================================================================
# Errors in a RedrivePolicy's content are InvalidParameterValue on AWS, e.g. captured from AWS:
#   "Value {...} for parameter RedrivePolicy is invalid. Reason: Redrive policy does not contain
#    mandatory attribute: maxReceiveCount. (Service: AmazonSQS; Status Code: 400; Error Code:
#    InvalidParameterValue" (rubyonjets/jets#101; also ansible-collections/community.aws#2321)
#   "api error InvalidParameterValue: Value {...} for parameter RedrivePolicy is invalid. Reason:
#    Dead-letter queue must be same type of queue as the source.." (Terraform against AWS)
# while a value that is not JSON at all is InvalidAttributeValue:
#   "InvalidAttributeValue: Invalid value for the parameter RedrivePolicy. Reason: Redrive policy
#    is not a valid JSON map." (Terraform against AWS, with a RequestID)

def test_create_with_redrive_policy(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq, 5)})
    policy = json.loads(sqs.attrs(src, "RedrivePolicy")["RedrivePolicy"])
    assert policy["deadLetterTargetArn"] == dlq.arn
    assert int(policy["maxReceiveCount"]) == 5


@pytest.mark.parametrize("count", [1, 1000, "1", "1000"], ids=repr)
def test_redrive_max_receive_count_edges_accepted(sqs, count):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq, count)})
    assert int(json.loads(sqs.attrs(src, "RedrivePolicy")["RedrivePolicy"])["maxReceiveCount"]) == int(count)


@pytest.mark.parametrize("value", ["not json", "{", "[]", "42", '"a string"'])
def test_redrive_policy_not_a_json_map_is_invalid_attribute_value(sqs, value):
    sqs.create("dlq")
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": value}), INVALID_ATTRIBUTE_VALUE)
    assert "Redrive policy is not a valid JSON map." in err.message


@pytest.mark.parametrize("count", [0, 1001, -1, "0", "1001", "abc"], ids=repr)
def test_redrive_max_receive_count_out_of_range(sqs, count):
    dlq = sqs.create("dlq")
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq, count)}), INVALID_PARAMETER_VALUE)
    assert f"Invalid value for maxReceiveCount: {count}, valid values are from 1 to 1000 both inclusive." \
        in err.message
    assert "src" not in sqs.list_names()


@pytest.mark.parametrize("missing", ["maxReceiveCount", "deadLetterTargetArn"])
def test_redrive_policy_missing_field(sqs, missing):
    dlq = sqs.create("dlq")
    doc = {"deadLetterTargetArn": dlq.arn, "maxReceiveCount": 3}
    del doc[missing]
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": json.dumps(doc)}), INVALID_PARAMETER_VALUE)
    assert f"Redrive policy does not contain mandatory attribute: {missing}." in err.message


def test_redrive_target_that_is_no_arn_is_refused_before_any_lookup(sqs):
    # LocalStack's AWS-recorded test_invalid_dead_letter_arn_rejected_before_lookup (2022 recording).
    value = json.dumps({"deadLetterTargetArn": "dummy", "maxReceiveCount": 42})
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": value}), INVALID_PARAMETER_VALUE)
    assert err.message == (f"Value {value} for parameter RedrivePolicy is invalid. "
                           "Reason: Invalid value for deadLetterTargetArn.")


def test_redrive_target_must_exist(sqs):
    ghost = NS.key("ghost")
    err = sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(ghost)}), INVALID_PARAMETER_VALUE)
    assert "Dead letter target does not exist." in err.message
    assert sqs.list_names() == []


def test_redrive_target_deleted_queue_does_not_exist(sqs):
    dlq = sqs.create("dlq")
    sqs.run(DeleteQueue(dlq))
    sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)


def test_redrive_target_in_another_account_is_rejected(sqs):
    # AWS developer guide: the dead-letter queue "must also be created using the same AWS account
    # and region as the source queue" (awsdocs, "Using Dead Letter Queues in Amazon SQS").
    foreign = sqs.create("dlq", ns=OTHER_ACCOUNT)
    sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(foreign)}), INVALID_PARAMETER_VALUE)
    assert sqs.list_names() == []


@pytest.mark.parametrize("source_fifo", [False, True])
def test_redrive_target_must_be_same_queue_type(sqs, source_fifo):
    if source_fifo:
        dlq = sqs.create("dlq")
        cmd = CreateQueue(NS, "src.fifo", fifo({"RedrivePolicy": redrive(dlq)}))
    else:
        dlq = sqs.create("dlq.fifo", fifo())
        cmd = CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)})
    err = sqs.fail(cmd, INVALID_PARAMETER_VALUE)
    assert "Dead-letter queue must be same type of queue as the source." in err.message


def test_fifo_source_with_fifo_dead_letter_queue(sqs):
    dlq = sqs.create("dlq.fifo", fifo())
    src = sqs.create("src.fifo", fifo({"RedrivePolicy": redrive(dlq)}))
    assert json.loads(sqs.attrs(src, "RedrivePolicy")["RedrivePolicy"])["deadLetterTargetArn"] == dlq.arn


def test_redrive_allow_policy_deny_all_rejects_every_source(sqs):
    dlq = sqs.create("dlq", {"RedriveAllowPolicy": json.dumps({"redrivePermission": "denyAll"})})
    sqs.fail(CreateQueue(NS, "src", {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)
    plain = sqs.create("src")
    sqs.fail(SetQueueAttributes(plain, {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)
    assert "RedrivePolicy" not in sqs.attrs(plain)


def test_redrive_allow_policy_by_queue_admits_only_listed_sources(sqs):
    allowed = NS.key("allowed")
    dlq = sqs.create("dlq", {"RedriveAllowPolicy": json.dumps(
        {"redrivePermission": "byQueue", "sourceQueueArns": [allowed.arn]})})
    assert sqs.create("allowed", {"RedrivePolicy": redrive(dlq)}) == allowed
    sqs.fail(CreateQueue(NS, "intruder", {"RedrivePolicy": redrive(dlq)}), INVALID_PARAMETER_VALUE)
    assert sorted(sqs.list_names()) == ["allowed", "dlq"]


def test_redrive_allow_policy_allow_all_admits_any_source(sqs):
    dlq = sqs.create("dlq", {"RedriveAllowPolicy": json.dumps({"redrivePermission": "allowAll"})})
    sqs.create("a", {"RedrivePolicy": redrive(dlq)})
    sqs.create("b", {"RedrivePolicy": redrive(dlq)})
    assert [k.name for k in sqs.run(ListDeadLetterSourceQueues(dlq)).queues] == ["a", "b"]


def test_set_redrive_policy_then_remove_it_with_empty_string(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src")
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 2)}))
    assert kinds(sqs.last) == [QueueUpdated]
    assert [k.name for k in sqs.run(ListDeadLetterSourceQueues(dlq)).queues] == ["src"]
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": ""}))
    assert kinds(sqs.last) == [QueueUpdated]
    assert "RedrivePolicy" not in sqs.attrs(src)
    assert sqs.run(ListDeadLetterSourceQueues(dlq)).queues == ()
    # and no redrive happens any more: the message keeps coming back to the source
    sqs.run(SetQueueAttributes(src, {"VisibilityTimeout": "1"}))
    sqs.send(src)
    for _ in range(4):
        assert len(sqs.receive(src)) == 1
        sqs.clock.advance(1_000)
    assert sqs.counts(dlq) == (0, 0, 0)
    sqs.assert_converged()


def test_set_redrive_policy_is_validated(sqs):
    src = sqs.create("src")
    sqs.fail(SetQueueAttributes(src, {"RedrivePolicy": redrive(NS.key("ghost"))}), INVALID_PARAMETER_VALUE)
    dlq = sqs.create("dlq")
    sqs.fail(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 0)}), INVALID_PARAMETER_VALUE)
    sqs.fail(SetQueueAttributes(src, {"RedrivePolicy": "{oops"}), INVALID_ATTRIBUTE_VALUE)
    assert "RedrivePolicy" not in sqs.attrs(src)


def test_set_redrive_policy_moves_messages_to_dlq(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"VisibilityTimeout": "1"})
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": redrive(dlq, 2)}))
    sqs.send(src, "poison")
    for _ in range(2):
        assert len(sqs.receive(src)) == 1
        sqs.clock.advance(1_000)
    assert sqs.receive(src) == ()
    assert [m.body for m in sqs.receive(dlq)] == ["poison"]


# =============================================================================================
# ListDeadLetterSourceQueues
# =============================================================================================

def test_list_dead_letter_source_queues(sqs):
    dlq = sqs.create("dlq")
    other_dlq = sqs.create("other-dlq")
    for name in ("src-b", "src-a", "src-c"):
        sqs.create(name, {"RedrivePolicy": redrive(dlq)})
    sqs.create("elsewhere", {"RedrivePolicy": redrive(other_dlq)})
    sqs.create("plain")
    result = sqs.run(ListDeadLetterSourceQueues(dlq))
    assert isinstance(result, ListDeadLetterSourceQueuesResult)
    assert sorted(k.name for k in result.queues) == ["src-a", "src-b", "src-c"]
    assert all(k.region == NS.region and k.account == NS.account for k in result.queues)
    assert result.next_token is None
    assert sqs.last == []
    assert [k.name for k in sqs.run(ListDeadLetterSourceQueues(other_dlq)).queues] == ["elsewhere"]
    assert sqs.run(ListDeadLetterSourceQueues(NS.key("plain"))).queues == ()


@pytest.mark.parametrize("page_size", [1, 2, 5, 6])
def test_list_dead_letter_source_queues_pagination(sqs, page_size):
    dlq = sqs.create("dlq")
    names = [f"src{i}" for i in range(5)]
    for name in names:
        sqs.create(name, {"RedrivePolicy": redrive(dlq)})
    pages, token = [], None
    for _ in range(20):
        result = sqs.run(ListDeadLetterSourceQueues(dlq, page_size, token))
        pages.append([k.name for k in result.queues])
        token = result.next_token
        if token is None:
            break
    seen = [n for page in pages for n in page]
    assert sorted(seen) == names
    assert len(seen) == len(set(seen))
    assert all(len(p) <= page_size for p in pages)
    assert len(pages) == -(-len(names) // page_size)


@pytest.mark.parametrize("max_results", [0, 1001])
def test_list_dead_letter_source_queues_max_results_out_of_range(sqs, max_results):
    dlq = sqs.create("dlq")
    sqs.fail(ListDeadLetterSourceQueues(dlq, max_results), INVALID_PARAMETER_VALUE)


def test_list_dead_letter_source_queues_invalid_token(sqs):
    dlq = sqs.create("dlq")
    sqs.create("src", {"RedrivePolicy": redrive(dlq)})
    sqs.fail(ListDeadLetterSourceQueues(dlq, 1, "not-a-token"), INVALID_PARAMETER_VALUE)


def test_list_dead_letter_source_queues_of_nonexistent_queue(sqs):
    sqs.fail(ListDeadLetterSourceQueues(NS.key("ghost")), NONEXISTENT)


def test_deleted_source_leaves_the_list(sqs):
    dlq = sqs.create("dlq")
    src = sqs.create("src", {"RedrivePolicy": redrive(dlq)})
    sqs.run(DeleteQueue(src))
    assert sqs.run(ListDeadLetterSourceQueues(dlq)).queues == ()


# =============================================================================================
# Dead-letter queues
# =============================================================================================

def test_dlq_message_moves_on_the_receive_after_max_receive_count(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=2)
    t_sent = env.now()
    sent = env.send(src, "poison", message_attributes={"k": S("v")})
    for _ in range(2):
        (m,) = env.receive(src, visibility_timeout=0)
        assert m.message_id == sent.message_id
    env.advance(1_000)
    assert env.receive(src) == ()
    deleted, added = env.mutations
    assert deleted == MessageDeleted(env.qids[src], sent.message_id)
    assert isinstance(added, MessageAdded) and added.qid == env.qids[dlq]
    assert added.message.message_id == sent.message_id
    assert added.message.dlq_source_arn == src.arn
    assert env.counts(src) == (0, 0, 0)
    assert env.counts(dlq) == (1, 0, 0)
    (d,) = env.receive(dlq, attribute_names=("All",), message_attribute_names=("All",))
    assert (d.message_id, d.body, d.md5_of_body) == (sent.message_id, "poison", sent.md5_of_body)
    assert dict(d.message_attributes) == {"k": S("v")}
    assert d.md5_of_message_attributes == sent.md5_of_message_attributes
    assert d.attributes["DeadLetterQueueSourceArn"] == src.arn
    # a standard DLQ keeps the original enqueue time
    assert d.attributes["SentTimestamp"] == str(t_sent)
    # and the receive count goes on from the source's (LocalStack's AWS-validated
    # test_dead_letter_queue_message_attributes: maxReceiveCount 1, the DLQ shows 2)
    assert added.message.receive_count == 2
    assert d.attributes["ApproximateReceiveCount"] == "3"


def test_redrive_by_move_task_starts_the_receive_count_afresh(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    env.send(src, "poison")
    env.receive(src, visibility_timeout=0)
    env.receive(src)
    env.run(StartMessageMoveTask(env.ns, dlq.arn))
    env.tick()
    (back,) = env.of_type(MessageAdded)
    assert back.qid == env.qids[src] and back.message.receive_count == 0
    (m,) = env.receive(src, attribute_names=("ApproximateReceiveCount",))
    assert m.attributes["ApproximateReceiveCount"] == "1"


def test_dlq_move_happens_during_a_receive_that_returns_other_messages(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    poison = env.send(src, "poison").message_id
    env.receive(src, visibility_timeout=0)
    fresh = env.send(src, "fresh").message_id
    ms = env.receive(src)
    assert [m.message_id for m in ms] == [fresh]
    assert [m.message_id for m in env.receive(dlq)] == [poison]


def test_dlq_source_arn_is_only_requested_explicitly(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    env.send(src, "m")
    env.receive(src, visibility_timeout=0)
    env.receive(src)
    (d,) = env.receive(dlq, visibility_timeout=0, system_attribute_names=("DeadLetterQueueSourceArn",))
    assert d.attributes == {"DeadLetterQueueSourceArn": src.arn}
    (d,) = env.receive(dlq)
    assert d.attributes == {}


def test_message_deleted_before_reaching_max_receive_count_never_moves(env):
    src, dlq = env.create_with_dlq("src", max_receive_count=1)
    env.send(src, "m")
    (m,) = env.receive(src)
    env.delete(src, m.receipt_handle)
    env.advance(60_000)
    assert env.receive(src) == ()
    assert env.counts(dlq) == (0, 0, 0)


def test_fifo_dlq_keeps_order(env):
    src, dlq = env.create_with_dlq("src.fifo", max_receive_count=1)
    sent = [fifo_send(env, src, f"m{i}") for i in range(4)]
    assert len(env.receive(src, visibility_timeout=0)) == 4
    assert env.receive(src) == ()
    assert len(env.of_type(MessageAdded)) == 4
    ms = env.receive(dlq, attribute_names=("All",))
    assert [m.message_id for m in ms] == [s.message_id for s in sent]
    assert [m.body for m in ms] == ["m0", "m1", "m2", "m3"]
    assert all(m.attributes["DeadLetterQueueSourceArn"] == src.arn for m in ms)
    assert all(m.attributes["MessageGroupId"] == "g" for m in ms)
    seqs = [int(m.attributes["SequenceNumber"]) for m in ms]
    assert seqs == sorted(set(seqs))


# =============================================================================================
# Message move tasks
# =============================================================================================

def fill_dlq(env: Env, n: int, name: str = "src") -> tuple[QueueKey, QueueKey, list[str]]:
    """A source queue with a DLQ holding ``n`` messages that were dead-lettered from it."""
    src, dlq = env.create_with_dlq(name, max_receive_count=1)
    ids = [env.send(src, f"m{i}").message_id for i in range(n)]
    for _ in range(2 * n + 2):
        if env.counts(dlq)[0] == n:
            break
        env.receive(src, visibility_timeout=0)
    assert env.counts(dlq) == (n, 0, 0)
    assert env.counts(src) == (0, 0, 0)
    return src, dlq, ids


def list_tasks(env: Env, source: QueueKey, max_results: int | None = None):
    return env.run(ListMessageMoveTasks(env.ns, source.arn, max_results)).results


def test_move_task_source_must_exist(env):
    env.fails(StartMessageMoveTask(env.ns, "arn:aws:sqs:us-east-1:000000000000:nope"), RESOURCE_NOT_FOUND)
    env.fails(StartMessageMoveTask(env.ns, None), MISSING_PARAMETER)


def test_move_task_source_must_be_a_dlq(env):
    q = env.create("plain")
    env.send(q, "m")
    err = env.fails(StartMessageMoveTask(env.ns, q.arn), INVALID_PARAMETER_VALUE)
    # No "Value ... Reason:" wrapping: LocalStack's AWS-recorded test_sqs_move_task.snapshot.json,
    # test_source_needs_redrive_policy.
    assert err.message == "Source queue must be configured as a Dead Letter Queue."


def test_move_task_destination_must_exist_and_match_type(env):
    src, dlq, _ = fill_dlq(env, 1)
    env.fails(StartMessageMoveTask(env.ns, dlq.arn, "arn:aws:sqs:us-east-1:000000000000:nope"),
              RESOURCE_NOT_FOUND)
    fifo = env.create("other.fifo")
    env.fails(StartMessageMoveTask(env.ns, dlq.arn, fifo.arn), INVALID_PARAMETER_VALUE)
    assert list_tasks(env, dlq) == ()


@pytest.mark.parametrize("rate", [0, -1, 501])
def test_move_task_rate_out_of_range(env, rate):
    src, dlq, _ = fill_dlq(env, 1)
    env.fails(StartMessageMoveTask(env.ns, dlq.arn, None, rate), INVALID_PARAMETER_VALUE)


@pytest.mark.parametrize("rate", [1, 500])
def test_move_task_rate_bounds_accepted(env, rate):
    src, dlq, _ = fill_dlq(env, 1)
    r = env.run(StartMessageMoveTask(env.ns, dlq.arn, None, rate))
    assert r.task_handle
    (task,) = list_tasks(env, dlq)
    assert task.max_messages_per_second == rate and task.status == "RUNNING"


def test_move_task_only_one_running_per_source(env):
    src, dlq, _ = fill_dlq(env, 2)
    env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 1))
    (started,) = env.of_type(MoveTaskUpdated)
    assert started.task.status == "RUNNING" and started.qid == env.qids[dlq]
    # LocalStack's AWS-recorded test_sqs_move_task.snapshot.json, test_start_multiple_move_tasks.
    err = env.fails(StartMessageMoveTask(env.ns, dlq.arn), INVALID_PARAMETER_VALUE)
    assert err.message == ("There is already a task running. Only one active task is allowed for a "
                           "source queue arn at a given time.")


def test_move_task_redrives_to_original_source(env):
    src, dlq, ids = fill_dlq(env, 3)
    t0 = env.now()
    r = env.run(StartMessageMoveTask(env.ns, dlq.arn))
    (task,) = list_tasks(env, dlq)
    assert task.task_handle == r.task_handle
    assert (task.status, task.source_arn, task.destination_arn) == ("RUNNING", dlq.arn, None)
    assert task.approximate_number_of_messages_moved == 0
    assert task.approximate_number_of_messages_to_move == 3
    assert task.started_timestamp == t0
    env.tick()
    assert len(env.of_type(MessageAdded)) == 3
    assert {a.qid for a in env.of_type(MessageAdded)} == {env.qids[src]}
    assert env.counts(dlq) == (0, 0, 0)
    assert env.counts(src) == (3, 0, 0)
    (task,) = list_tasks(env, dlq)
    assert task.status == "COMPLETED"
    assert task.task_handle is None
    assert task.approximate_number_of_messages_moved == 3
    ms = env.receive(src, attribute_names=("All",))
    assert sorted(m.message_id for m in ms) == sorted(ids)
    for m in ms:
        assert "DeadLetterQueueSourceArn" not in m.attributes
        assert m.attributes["ApproximateReceiveCount"] == "1"


def test_move_task_to_explicit_destination(env):
    src, dlq, ids = fill_dlq(env, 2)
    dest = env.create("dest")
    env.run(StartMessageMoveTask(env.ns, dlq.arn, dest.arn))
    env.tick()
    assert env.counts(dest) == (2, 0, 0)
    assert env.counts(src) == (0, 0, 0)
    assert sorted(m.message_id for m in env.receive(dest)) == sorted(ids)
    (task,) = list_tasks(env, dlq)
    assert (task.status, task.destination_arn, task.approximate_number_of_messages_moved) == (
        "COMPLETED", dest.arn, 2)


def test_move_task_honours_rate_as_clock_advances(env):
    src, dlq, _ = fill_dlq(env, 10)
    env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 2))
    env.tick()
    assert env.counts(src)[0] == 0
    env.advance(1_000)
    env.tick()
    assert env.counts(src)[0] == 2
    env.advance(1_000)
    env.tick()
    assert env.counts(src)[0] == 4
    (task,) = list_tasks(env, dlq)
    assert task.status == "RUNNING" and task.approximate_number_of_messages_moved == 4
    env.advance(500)
    env.tick()
    assert 4 <= env.counts(src)[0] <= 5   # never ahead of 2/s * 2.5 s
    env.advance(500)
    env.tick()
    assert env.counts(src)[0] == 6
    env.advance(10_000)
    env.tick()
    assert env.counts(src)[0] == 10 and env.counts(dlq)[0] == 0
    (task,) = list_tasks(env, dlq)
    assert task.status == "COMPLETED" and task.approximate_number_of_messages_moved == 10


def test_move_task_cancel(env):
    src, dlq, _ = fill_dlq(env, 5)
    handle = env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 1)).task_handle
    env.advance(2_000)
    env.tick()
    r = env.run(CancelMessageMoveTask(env.ns, handle))
    assert r.approximate_number_of_messages_moved == 2
    (upd,) = env.of_type(MoveTaskUpdated)
    assert upd.task.status == "CANCELLED"
    (task,) = list_tasks(env, dlq)
    assert task.status == "CANCELLED" and task.task_handle is None
    assert task.approximate_number_of_messages_moved == 2
    env.advance(60_000)
    env.tick()
    assert env.counts(src)[0] == 2 and env.counts(dlq)[0] == 3
    # a cancelled task cannot be cancelled again, and a new task may start
    env.fails(CancelMessageMoveTask(env.ns, handle))
    env.fails(CancelMessageMoveTask(env.ns, None), MISSING_PARAMETER)
    env.run(StartMessageMoveTask(env.ns, dlq.arn))
    env.tick()
    assert env.counts(src)[0] == 5


def test_list_message_move_tasks_newest_first_and_max_results(env):
    src, dlq, _ = fill_dlq(env, 3)
    h1 = env.run(StartMessageMoveTask(env.ns, dlq.arn, None, 1)).task_handle
    env.run(CancelMessageMoveTask(env.ns, h1))
    env.advance(1_000)
    env.run(StartMessageMoveTask(env.ns, dlq.arn))
    env.tick()
    env.advance(1_000)
    h3 = env.run(StartMessageMoveTask(env.ns, dlq.arn))  # nothing left to move
    (latest,) = list_tasks(env, dlq)      # default MaxResults is 1: the most recent task
    assert latest.status == "RUNNING" and latest.task_handle == h3.task_handle
    assert latest.approximate_number_of_messages_to_move == 0
    env.tick()
    tasks = list_tasks(env, dlq, 10)
    assert len(tasks) == 3
    assert tasks[0].status == "COMPLETED" and tasks[0].task_handle is None
    assert [t.started_timestamp for t in tasks] == sorted((t.started_timestamp for t in tasks), reverse=True)
    assert tasks[1].status == "COMPLETED" and tasks[1].approximate_number_of_messages_moved == 3
    assert tasks[2].status == "CANCELLED"
    assert all(t.task_handle is None for t in tasks if t.status != "RUNNING")
    assert len(list_tasks(env, dlq, 2)) == 2
    assert env.mutations == []


@pytest.mark.parametrize("n", [0, 11, -1])
def test_list_message_move_tasks_max_results_range(env, n):
    src, dlq, _ = fill_dlq(env, 1)
    env.fails(ListMessageMoveTasks(env.ns, dlq.arn, n), INVALID_PARAMETER_VALUE)


def test_list_message_move_tasks_source_errors(env):
    env.fails(ListMessageMoveTasks(env.ns, None), MISSING_PARAMETER)
    env.fails(ListMessageMoveTasks(env.ns, "arn:aws:sqs:us-east-1:000000000000:nope"), RESOURCE_NOT_FOUND)
