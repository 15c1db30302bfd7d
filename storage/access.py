"""Who may act on a queue: its own account, or another account its Policy grants.

A command carries ``caller``, the account of the credentials that signed the request, when the
endpoint verifies signatures (``[auth] mode = "sigv4"``); ``None`` means nobody was
authenticated and every account's queues are reachable, as without authentication.

The check runs here, in ``Storage.execute``, and not in the endpoint: it reads the queue's
Policy at the moment the command executes, on whichever node executes it (the master; a replica
forwards the raw request), so a check and the state it reads can never come from two different
copies, and a Policy that AddPermission or RemovePermission just changed applies to the very next
command. It emits nothing, so replicas, which only apply mutations, never run it. On the hot
path it costs one comparison: the caller's own queues need no Policy.

The rule is the part of SQS's access policy language that AddPermission writes: an ``Allow``
statement whose principal is the caller's account (``arn:aws:iam::ACCOUNT:root``, the bare
account id, or ``*``) and whose action is the request's (``SQS:SendMessage``, ``SQS:*``, case
insensitive, ``*``). A ``Deny`` statement that matches wins over any Allow (IAM's evaluation
logic). Conditions, resource patterns and IAM identity policies are not evaluated
(docs/semantics.md); a statement with a Condition never grants. Actions in
``OWNER_ONLY_ACTIONS`` are never granted to another account ("Cross-account permissions don't
apply to the following actions", SQS Developer Guide, sqs-limitations-of-custom-policies).
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from storage.errors import ErrorKind, SqsError
from storage.keys import parse_arn
from storage.permissions import OWNER_ONLY_ACTIONS

# AWS's answer to an SQS call that no policy allows, in both protocols: 403, AccessDenied
# (X-Amzn-Query-Error: AccessDenied;Sender), JSON __type from AWS's common front end, not SQS's
# model (tests/conformance/test_auth.py cites the recordings).
ACCESS_DENIED = ErrorKind("com.amazon.coral.service#AccessDeniedException", "AccessDenied", 403)


def access_denied(caller: str, action: str, arn: str) -> SqsError:
    """IAM's wording for a cross-account call that no resource-based policy allows (IAM User
    Guide, troubleshoot_access-denied: "... because no resource-based policy allows the ...
    action"); SQS names the action in lower case (sqs:sendmessage)."""
    act = f"sqs:{action.lower()}"
    return ACCESS_DENIED(f"User: arn:aws:iam::{caller}:root is not authorized to perform: {act} on resource: "
                         f"{arn} because no resource-based policy allows the {act} action")


# A batch is authorized as its single action (IAM has no sqs:SendMessageBatch: SQS Developer
# Guide, sqs-api-permissions-reference); AddPermission accepts either name, so either grants both.
_SAME = {"sendmessagebatch": "sendmessage", "deletemessagebatch": "deletemessage",
         "changemessagevisibilitybatch": "changemessagevisibility"}
_SAME.update({v: k for k, v in _SAME.items()})


def authorize(command: Any, caller: str, queues: Mapping[tuple[str, str, str], Any]) -> None:
    """Raise AccessDenied unless account ``caller`` may run ``command`` (``queues``: the
    storage's queues by (region, account, name))."""
    key = getattr(command, "queue", None)
    action = type(command).__name__
    if key is None:
        if action == "GetQueueUrl":
            owner = command.owner_account or command.ns.account
            if owner == caller or not command.name:
                return
            key = (command.ns.region, owner, command.name)
            arn = f"arn:aws:sqs:{command.ns.region}:{owner}:{command.name}"
        else:   # the message move tasks: their SourceArn names the queue
            target = parse_arn(getattr(command, "source_arn", None))
            if target is None or target.account == caller:
                return
            raise access_denied(caller, action, target.arn)
    else:
        if key.account == caller:
            return
        arn = key.arn
        key = (key.region, key.account, key.name)
    q = queues.get(key)
    if q is None or not allowed(q.attributes.get("Policy"), caller, action):
        raise access_denied(caller, action, arn)


def allowed(policy: str | None, caller: str, action: str) -> bool:
    """Whether ``policy`` (a queue's Policy attribute, JSON) lets account ``caller`` call
    ``action`` on the queue."""
    if action in OWNER_ONLY_ACTIONS or not policy:
        return False
    grants = _grants(policy)
    act = action.lower()
    same = _SAME.get(act, act)
    verdict = False
    for effect, principals, actions in grants:
        if (caller in principals or "*" in principals) and (act in actions or same in actions or "*" in actions):
            if effect == "deny":
                return False
            verdict = True
    return verdict


# A Policy's statements as (effect, accounts, actions), per Policy text: clients repeat the
# few policies they have, and parsing one costs more than the request. Emptied when full.
_GRANTS: dict[str, tuple] = {}
_GRANTS_MAX = 1024


def _grants(policy: str) -> tuple:
    grants = _GRANTS.get(policy)
    if grants is None:
        grants = _parse(policy)
        if len(_GRANTS) >= _GRANTS_MAX:
            _GRANTS.clear()
        _GRANTS[policy] = grants
    return grants


def _parse(policy: str) -> tuple:
    try:
        doc = json.loads(policy)
    except ValueError:
        return ()
    statements = doc.get("Statement", []) if isinstance(doc, dict) else []
    if isinstance(statements, dict):
        statements = [statements]
    out = []
    for st in statements if isinstance(statements, list) else ():
        if not isinstance(st, dict) or "Condition" in st:
            continue
        effect = str(st.get("Effect", "")).lower()
        if effect not in ("allow", "deny"):
            continue
        out.append((effect, frozenset(_accounts(st.get("Principal"))), frozenset(_actions(st.get("Action")))))
    return tuple(out)


def _listed(v) -> list:
    return [v] if isinstance(v, str) else [x for x in v if isinstance(x, str)] if isinstance(v, list) else []


def _accounts(principal) -> list[str]:
    if principal == "*":
        return ["*"]
    if not isinstance(principal, dict):
        return []
    out = []
    for p in _listed(principal.get("AWS")):
        if p == "*":
            out.append("*")
        elif p.startswith("arn:aws:iam::") and p.endswith(":root"):
            out.append(p[len("arn:aws:iam::"):-len(":root")])
        elif p.isdigit():
            out.append(p)
    return out


def _actions(action) -> list[str]:
    out = []
    for a in _listed(action):
        a = a.lower()
        if a == "*":
            out.append("*")
        elif a.startswith("sqs:"):
            out.append(a[4:])
    return out
