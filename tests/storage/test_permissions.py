"""AddPermission and RemovePermission (storage/permissions.py): the Policy they write, and their
errors.

The ``sqs`` harness (tests/storage/queue_env.py) checks each command's result, the state later
commands see, the mutations emitted, and that a rejected command leaves no trace.
"""

from __future__ import annotations

import json

import pytest

from storage.commands import AddPermission, QueueKey, RemovePermission
from storage.mutations import QueueUpdated
from tests.storage.queue_env import (
    INVALID_PARAMETER_VALUE, MISSING_PARAMETER, NONEXISTENT, NS, OVER_LIMIT, Sqs, kinds,
)


# =============================================================================================
# AddPermission / RemovePermission
# =============================================================================================

def policy_of(sqs: Sqs, key: QueueKey) -> dict | None:
    raw = sqs.attrs(key, "Policy").get("Policy")
    return json.loads(raw) if raw else None


def test_add_permission_writes_the_policy(sqs):
    key = sqs.create("shared")
    assert sqs.run(AddPermission(key, "AliceSend", ("111122223333",), ("SendMessage",))) is None
    assert kinds(sqs.last) == [QueueUpdated]
    policy = policy_of(sqs, key)
    assert policy["Version"] == "2008-10-17"   # LocalStack's AWS-validated test_sqs_permission_lifecycle
    assert policy["Id"] == f"{key.arn}/SQSDefaultPolicy"
    assert policy["Statement"] == [{
        "Sid": "AliceSend",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
        "Action": "SQS:SendMessage",
        "Resource": key.arn,
    }]
    sqs.assert_converged()


def test_add_permission_with_several_accounts_and_actions(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "one", ("111122223333",), ("SendMessage",)))
    sqs.run(AddPermission(key, "two", ("111111111111", "222222222222"), ("ReceiveMessage", "DeleteMessage")))
    statements = policy_of(sqs, key)["Statement"]
    assert [s["Sid"] for s in statements] == ["one", "two"]
    two = statements[1]
    assert sorted(two["Principal"]["AWS"]) == ["arn:aws:iam::111111111111:root", "arn:aws:iam::222222222222:root"]
    assert sorted(two["Action"]) == ["SQS:DeleteMessage", "SQS:ReceiveMessage"]


def test_add_permission_wildcard_action(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "all", ("111122223333",), ("*",)))
    assert policy_of(sqs, key)["Statement"][0]["Action"] == "SQS:*"


def test_add_permission_duplicate_label(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "dup", ("111122223333",), ("SendMessage",)))
    before = policy_of(sqs, key)
    err = sqs.fail(AddPermission(key, "dup", ("444455556666",), ("ReceiveMessage",)), INVALID_PARAMETER_VALUE)
    # LocalStack's AWS-validated test_sqs_permission_lifecycle.
    assert err.message == "Value dup for parameter Label is invalid. Reason: Already exists."
    assert policy_of(sqs, key) == before


@pytest.mark.parametrize("label", ["has space", "a" * 81, "semi;colon", "dot.label"])
def test_add_permission_bad_label(sqs, label):
    key = sqs.create("shared")
    sqs.fail(AddPermission(key, label, ("111122223333",), ("SendMessage",)), INVALID_PARAMETER_VALUE)
    assert policy_of(sqs, key) is None


def test_add_permission_label_edges(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "a" * 80, ("111122223333",), ("SendMessage",)))
    sqs.run(AddPermission(key, "x-Y_9", ("111122223333",), ("SendMessage",)))
    assert [s["Sid"] for s in policy_of(sqs, key)["Statement"]] == ["a" * 80, "x-Y_9"]


def test_add_permission_too_many_actions_is_over_limit(sqs):
    key = sqs.create("shared")
    actions = ("SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
               "GetQueueAttributes", "GetQueueUrl", "PurgeQueue", "ListDeadLetterSourceQueues")
    sqs.fail(AddPermission(key, "many", ("111122223333",), actions), OVER_LIMIT, status=403)
    sqs.run(AddPermission(key, "seven", ("111122223333",), actions[:7]))
    assert len(policy_of(sqs, key)["Statement"][0]["Action"]) == 7


@pytest.mark.parametrize("action,reason", [
    ("Explode", "Please refer to the appropriate WSDL for a list of valid actions."),
    ("sendmessage", "Please refer to the appropriate WSDL for a list of valid actions."),
    ("SQS:SendMessage", "Please refer to the appropriate WSDL for a list of valid actions."),
    ("CreateQueue", "Only the queue owner is allowed to invoke this action."),
    ("ListQueueTags", "Only the queue owner is allowed to invoke this action."),
])
def test_add_permission_invalid_action(sqs, action, reason):
    # The value carries the SQS: prefix; the reasons are other reimplementations' (moto,
    # Eucalyptus), AWS's unrecorded: see README, "Semantics worth knowing".
    key = sqs.create("shared")
    err = sqs.fail(AddPermission(key, "bad", ("111122223333",), ("SendMessage", action)), INVALID_PARAMETER_VALUE)
    assert err.message == f"Value SQS:{action} for parameter ActionName is invalid. Reason: {reason}"


@pytest.mark.parametrize("accounts,shown", [
    (("arn:aws:iam::111122223333:user/alice",), "[arn:aws:iam::111122223333:user/alice]"),
    (("*",), "[*]"),
    (("alice", "bob"), "[alice, bob]"),
])
def test_add_permission_needs_an_account_principal(sqs, accounts, shown):
    # aws-cli issue #7416 (an ARN: "Reason: Unable to verify principal."), aws-sdk-core-ruby issue
    # #138 (the list in brackets: "Value [*] ...").
    key = sqs.create("shared")
    err = sqs.fail(AddPermission(key, "p", accounts, ("SendMessage",)), INVALID_PARAMETER_VALUE)
    assert err.message == f"Value {shown} for parameter PrincipalId is invalid. Reason: Unable to verify principal."
    assert policy_of(sqs, key) is None


def test_add_permission_keeps_only_the_account_principals(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "p", ("arn:aws:iam::111122223333:user/alice", "444455556666"), ("SendMessage",)))
    assert policy_of(sqs, key)["Statement"][0]["Principal"] == {"AWS": "arn:aws:iam::444455556666:root"}


@pytest.mark.parametrize("label,accounts,actions", [
    (None, ("111122223333",), ("SendMessage",)),
    ("l", None, ("SendMessage",)),
    ("l", (), ("SendMessage",)),
    ("l", ("111122223333",), None),
    ("l", ("111122223333",), ()),
])
def test_add_permission_missing_parameters(sqs, label, accounts, actions):
    key = sqs.create("shared")
    sqs.fail(AddPermission(key, label, accounts, actions), MISSING_PARAMETER)


def test_remove_permission(sqs):
    key = sqs.create("shared")
    sqs.run(AddPermission(key, "one", ("111122223333",), ("SendMessage",)))
    sqs.run(AddPermission(key, "two", ("111122223333",), ("ReceiveMessage",)))
    assert sqs.run(RemovePermission(key, "one")) is None
    assert kinds(sqs.last) == [QueueUpdated]
    assert [s["Sid"] for s in policy_of(sqs, key)["Statement"]] == ["two"]
    sqs.run(RemovePermission(key, "two"))
    # the last statement gone, so is the policy (LocalStack's AWS-validated test_sqs_permission_lifecycle)
    assert policy_of(sqs, key) is None
    sqs.assert_converged()


def test_remove_unknown_label(sqs):
    key = sqs.create("shared")
    err = sqs.fail(RemovePermission(key, "never"), INVALID_PARAMETER_VALUE)
    # LocalStack's AWS-validated test_sqs_permission_lifecycle.
    assert err.message == "Value never for parameter Label is invalid. Reason: can't find label."
    sqs.run(AddPermission(key, "one", ("111122223333",), ("SendMessage",)))
    sqs.fail(RemovePermission(key, "two"), INVALID_PARAMETER_VALUE)
    assert [s["Sid"] for s in policy_of(sqs, key)["Statement"]] == ["one"]


def test_remove_permission_missing_label(sqs):
    key = sqs.create("shared")
    sqs.fail(RemovePermission(key, None), MISSING_PARAMETER)


def test_add_permission_keeps_an_existing_policy(sqs):
    existing = {"Version": "2012-10-17", "Id": "custom", "Statement": [
        {"Sid": "pre", "Effect": "Deny", "Principal": "*", "Action": "SQS:*", "Resource": "*"}]}
    key = sqs.create("shared", {"Policy": json.dumps(existing)})
    sqs.run(AddPermission(key, "added", ("111122223333",), ("SendMessage",)))
    policy = policy_of(sqs, key)
    assert policy["Id"] == "custom"
    assert [s["Sid"] for s in policy["Statement"]] == ["pre", "added"]
    sqs.fail(AddPermission(key, "pre", ("111122223333",), ("SendMessage",)), INVALID_PARAMETER_VALUE)


@pytest.mark.parametrize("command", [
    AddPermission(NS.key("ghost"), "l", ("111122223333",), ("SendMessage",)),
    RemovePermission(NS.key("ghost"), "l"),
])
def test_permissions_on_nonexistent_queue(sqs, command):
    sqs.fail(command, NONEXISTENT)
