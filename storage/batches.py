"""Batch actions run entry by entry: one entry's SQS error is that entry's failure."""

from __future__ import annotations

from typing import Any, Callable, Iterable

from storage.errors import SqsError
from storage.results import BatchResultError


def each_entry(entries: Iterable[Any], fn: Callable[[Any], Any]) -> tuple[tuple, tuple[BatchResultError, ...]]:
    """Run a batch entry by entry: one entry's SQS error is that entry's failure, not the batch's."""
    ok: list = []
    failed: list[BatchResultError] = []
    for e in entries:
        try:
            ok.append(fn(e))
        except SqsError as err:
            failed.append(BatchResultError(e.id, err.code, err.message, err.sender_fault))
    return tuple(ok), tuple(failed)
