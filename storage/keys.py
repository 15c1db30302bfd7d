"""How the engine finds a queue: by its key's strings, or by its ARN."""

from __future__ import annotations

import re

from storage.commands import QueueKey

_ARN_RE = re.compile(r"arn:aws:sqs:([^:]+):([^:]+):([^:]+)")


def key_names(key: QueueKey) -> tuple[str, str, str]:
    """A queue key as a dict key. A tuple of strings hashes and compares in C; QueueKey's
    dataclass-generated __hash__ and __eq__ are Python calls, several times the cost, and each
    request brings a new QueueKey object, so a lookup by it pays for both."""
    return (key.region, key.account, key.name)


def parse_arn(arn: str | None) -> QueueKey | None:
    m = _ARN_RE.fullmatch(arn or "")
    return QueueKey(*m.groups()) if m else None
