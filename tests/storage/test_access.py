"""Who may act on a queue (storage/access.py): its own account always; another account only
through an Allow in the queue's Policy; nobody checked when a command carries no caller."""

from __future__ import annotations

import json

import pytest

from storage.access import allowed
from storage.commands import (
    AddPermission, CancelMessageMoveTask, DeleteQueue, GetQueueAttributes, GetQueueUrl, ListMessageMoveTasks, Namespace, PurgeQueue,
    RemovePermission, SendMessage, SendMessageBatch, SendMessageBatchEntry, SetQueueAttributes, StartMessageMoveTask,
)
from tests.storage.queue_env import NS, Sqs

OWNER = NS.account
OTHER = "111122223333"
THIRD = "444455556666"


def denied(sqs: Sqs, command, action: str, arn: str) -> None:
    err = sqs.fail(command, "AccessDenied", 403)
    act = f"sqs:{action.lower()}"
    assert err.message == (f"User: arn:aws:iam::{command.caller}:root is not authorized to perform: {act} on "
                           f"resource: {arn} because no resource-based policy allows the {act} action")
    assert err.kind.shape == "com.amazon.coral.service#AccessDeniedException"


def test_the_owner_needs_no_policy(sqs):
    key = sqs.create("mine")
    assert sqs.run(SendMessage(key, "m", caller=OWNER)).message_id
    assert sqs.run(DeleteQueue(key, caller=OWNER)) is None


def test_without_a_caller_nothing_is_checked(sqs):
    key = sqs.create("open")
    assert sqs.run(SendMessage(key, "m")).message_id
    assert sqs.run(GetQueueUrl(Namespace(NS.region, OTHER), "open", OWNER)).queue == key


def test_another_account_is_denied_until_granted_and_again_after_removal(sqs):
    key = sqs.create("shared")
    denied(sqs, SendMessage(key, "m", caller=OTHER), "SendMessage", key.arn)
    sqs.run(AddPermission(key, "send", (OTHER,), ("SendMessage",), caller=OWNER))
    assert sqs.run(SendMessage(key, "m", caller=OTHER)).message_id
    # a batch is authorized as its single action
    assert sqs.run(SendMessageBatch(key, (SendMessageBatchEntry("1", "m"),), caller=OTHER)).successful
    denied(sqs, GetQueueAttributes(key, ("All",), caller=OTHER), "GetQueueAttributes", key.arn)
    denied(sqs, SendMessage(key, "m", caller=THIRD), "SendMessage", key.arn)
    sqs.run(RemovePermission(key, "send", caller=OWNER))
    denied(sqs, SendMessage(key, "m", caller=OTHER), "SendMessage", key.arn)


def test_owner_only_actions_are_never_granted(sqs):
    key = sqs.create("shared")
    policy = {"Statement": [{"Effect": "Allow", "Principal": "*", "Action": "sqs:*", "Resource": key.arn}]}
    sqs.run(SetQueueAttributes(key, {"Policy": json.dumps(policy)}, caller=OWNER))
    assert sqs.run(PurgeQueue(key, caller=OTHER)) is None
    denied(sqs, SetQueueAttributes(key, {"DelaySeconds": "1"}, caller=OTHER), "SetQueueAttributes", key.arn)
    denied(sqs, DeleteQueue(key, caller=OTHER), "DeleteQueue", key.arn)
    denied(sqs, AddPermission(key, "x", (OTHER,), ("SendMessage",), caller=OTHER), "AddPermission", key.arn)


def test_get_queue_url_of_another_account_needs_a_grant(sqs):
    key = sqs.create("shared")
    ns = Namespace(NS.region, OTHER)
    denied(sqs, GetQueueUrl(ns, "shared", OWNER, caller=OTHER), "GetQueueUrl", key.arn)
    sqs.run(AddPermission(key, "url", (OTHER,), ("GetQueueUrl",), caller=OWNER))
    assert sqs.run(GetQueueUrl(ns, "shared", OWNER, caller=OTHER)).queue == key


def test_a_queue_of_another_account_that_does_not_exist_is_denied_too(sqs):
    missing = NS.key("missing")
    denied(sqs, SendMessage(missing, "m", caller=OTHER), "SendMessage", missing.arn)


def test_a_move_task_on_another_accounts_queue_is_denied(sqs):
    key = sqs.create("dlq")
    denied(sqs, ListMessageMoveTasks(Namespace(NS.region, OTHER), key.arn, caller=OTHER), "ListMessageMoveTasks",
           key.arn)


def test_another_account_cannot_cancel_a_move_task_by_its_handle(sqs):
    src = sqs.create("src")
    dlq = sqs.create("dlq-of-src")
    sqs.run(SetQueueAttributes(src, {"RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq.arn,
                                                                   "maxReceiveCount": 1})}))
    sqs.run(SendMessage(dlq, "stuck"))
    sqs.run(AddPermission(dlq, "all", (OTHER,), ("*",), caller=OWNER))   # grants nothing owner-only
    handle = sqs.run(StartMessageMoveTask(NS, dlq.arn, max_messages_per_second=1, caller=OWNER)).task_handle
    denied(sqs, CancelMessageMoveTask(Namespace(NS.region, OTHER), handle, caller=OTHER), "CancelMessageMoveTask",
           dlq.arn)
    assert sqs.run(CancelMessageMoveTask(NS, handle, caller=OWNER)).approximate_number_of_messages_moved == 0


@pytest.mark.parametrize("statement, verdict", [
    ({"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{OTHER}:root"}, "Action": "SQS:SendMessage"}, True),
    ({"Effect": "Allow", "Principal": {"AWS": [OTHER]}, "Action": ["sqs:ReceiveMessage", "sqs:sendmessage"]}, True),
    ({"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "SQS:*"}, True),
    ({"Effect": "Allow", "Principal": "*", "Action": "*"}, True),
    ({"Effect": "Allow", "Principal": {"AWS": f"arn:aws:iam::{THIRD}:root"}, "Action": "SQS:*"}, False),
    ({"Effect": "Allow", "Principal": {"AWS": OTHER}, "Action": "SQS:ReceiveMessage"}, False),
    ({"Effect": "Allow", "Principal": {"AWS": OTHER}, "Action": "SQS:SendMessageBatch"}, True),
    ({"Effect": "Allow", "Principal": {"AWS": OTHER}, "Action": "SQS:*",
      "Condition": {"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}}, False),
    ({"Effect": "Allow", "Principal": {"Service": "sns.amazonaws.com"}, "Action": "SQS:SendMessage"}, False),
])
def test_which_statements_grant_send_message(statement, verdict):
    assert allowed(json.dumps({"Statement": [statement]}), OTHER, "SendMessage") is verdict
    assert allowed(json.dumps({"Statement": statement}), OTHER, "SendMessage") is verdict


def test_a_matching_deny_wins():
    allow = {"Effect": "Allow", "Principal": "*", "Action": "SQS:*"}
    deny = {"Effect": "Deny", "Principal": {"AWS": OTHER}, "Action": "SQS:SendMessage"}
    assert allowed(json.dumps({"Statement": [allow, deny]}), OTHER, "SendMessage") is False
    assert allowed(json.dumps({"Statement": [allow, deny]}), THIRD, "SendMessage") is True


@pytest.mark.parametrize("policy", [None, "", "not json", "[]", '{"Statement": 3}'])
def test_no_readable_policy_grants_nothing(policy):
    assert allowed(policy, OTHER, "SendMessage") is False
