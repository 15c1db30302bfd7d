"""AddPermission and RemovePermission: the statements they write in a queue's Policy.

A mixin of ``Storage`` (storage/engine.py). The policy is the document AWS shows for the same
calls; storage/access.py enforces its grants when requests are authenticated.
"""

from __future__ import annotations

import json
import re

from storage.commands import AddPermission, RemovePermission
from storage.errors import OVER_LIMIT, invalid_parameter, missing_parameter
from storage.model import Queue
from storage.mutations import QueueUpdated

PERMISSION_ACTIONS = frozenset((
    "*", "SendMessage", "ReceiveMessage", "DeleteMessage", "ChangeMessageVisibility",
    "GetQueueAttributes", "GetQueueUrl", "ListDeadLetterSourceQueues", "PurgeQueue",
    "SendMessageBatch", "DeleteMessageBatch", "ChangeMessageVisibilityBatch"))
# Actions no other account can be granted ("Cross-account permissions don't apply to the
# following actions", SQS Developer Guide, sqs-limitations-of-custom-policies).
OWNER_ONLY_ACTIONS = frozenset((
    "AddPermission", "CancelMessageMoveTask", "CreateQueue", "DeleteQueue", "ListMessageMoveTasks",
    "ListQueues", "ListQueueTags", "RemovePermission", "SetQueueAttributes", "StartMessageMoveTask",
    "TagQueue", "UntagQueue"))
MAX_PERMISSION_ACTIONS = 7
# AddPermission grants to accounts only: "does not support adding a non-account principal"
# (AddPermission API reference).
_ACCOUNT_ID_RE = re.compile(r"[0-9]{12}")
_LABEL_RE = re.compile(r"[A-Za-z0-9_-]{1,80}")


class Permissions:
    """AddPermission and RemovePermission."""

    def _policy(self, q: Queue) -> dict:
        raw = q.attributes.get("Policy")
        if raw:
            try:
                doc = json.loads(raw)
            except ValueError:
                doc = None
            if isinstance(doc, dict):
                statements = doc.get("Statement", [])
                # A policy set by hand may hold a single statement as an object.
                doc["Statement"] = [statements] if isinstance(statements, dict) else list(statements or ())
                return doc
        # The policy AddPermission writes on AWS (LocalStack's AWS-validated test_sqs_permission_lifecycle).
        return {"Version": "2008-10-17", "Id": f"{q.arn}/SQSDefaultPolicy", "Statement": []}

    def _set_policy(self, q: Queue, doc: dict | None, now: int, out: list) -> None:
        attrs = dict(q.attributes)
        if doc is None:
            attrs.pop("Policy", None)
        else:
            attrs["Policy"] = json.dumps(doc, separators=(",", ":"))
        self._emit(out, QueueUpdated(q.qid, q.version + 1, now, attrs, q.tags))

    def _add_permission(self, c: AddPermission, now: int, out: list) -> None:
        q = self._queue(c.queue)
        if not c.label:
            raise missing_parameter("Label")
        if not _LABEL_RE.fullmatch(c.label):
            raise invalid_parameter("Label", c.label, "Can only include alphanumeric characters, hyphens, or "
                                                      "underscores. 1 to 80 in length")
        if not c.account_ids:
            raise missing_parameter("AWSAccountIds")
        if not c.actions:
            raise missing_parameter("Actions")
        for action in c.actions:
            if action not in PERMISSION_ACTIONS:
                reason = ("Only the queue owner is allowed to invoke this action" if action in OWNER_ONLY_ACTIONS
                          else "Please refer to the appropriate WSDL for a list of valid actions")
                raise invalid_parameter("ActionName", f"SQS:{action}", reason)
        if len(c.actions) > MAX_PERMISSION_ACTIONS:
            raise OVER_LIMIT(f"{len(c.actions)} Actions were found, maximum allowed is {MAX_PERMISSION_ACTIONS}.")
        # Ids that are not account ids are left out; with none left, AWS names the whole list
        # the way Java prints one ("Value [*] ... Unable to verify." in aws-sdk-core-ruby issue
        # #138, "Value [<arn>] ... Reason: Unable to verify principal." in aws-cli issue #7416).
        accounts = [a for a in c.account_ids if isinstance(a, str) and _ACCOUNT_ID_RE.fullmatch(a)]
        if not accounts:
            raise invalid_parameter("PrincipalId", f"[{', '.join(map(str, c.account_ids))}]",
                                    "Unable to verify principal")
        doc = self._policy(q)
        if any(st.get("Sid") == c.label for st in doc["Statement"] if isinstance(st, dict)):
            raise invalid_parameter("Label", c.label, "Already exists")
        principals = [f"arn:aws:iam::{a}:root" for a in accounts]
        doc["Statement"].append({
            "Sid": c.label, "Effect": "Allow",
            "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
            "Action": [f"SQS:{a}" for a in c.actions] if len(c.actions) > 1 else f"SQS:{c.actions[0]}",
            "Resource": q.arn,
        })
        self._set_policy(q, doc, now, out)

    def _remove_permission(self, c: RemovePermission, now: int, out: list) -> None:
        q = self._queue(c.queue)
        if not c.label:
            raise missing_parameter("Label")
        doc = self._policy(q)
        kept = [st for st in doc["Statement"] if not (isinstance(st, dict) and st.get("Sid") == c.label)]
        if len(kept) == len(doc["Statement"]):
            raise invalid_parameter("Label", c.label, "can't find label")
        doc["Statement"] = kept
        self._set_policy(q, doc if kept else None, now, out)
