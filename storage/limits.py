"""SQS's numeric limits, in a strict profile (what AWS enforces; the default) and a relaxed one.

Relaxed mode follows ElasticMQ's: counts and sizes that AWS caps are allowed to grow, for tests
and batch jobs that want to move more per call. Semantics (FIFO order, visibility, dedup) and the
validation of content (allowed characters, attribute types) are the same in both.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    name: str
    max_receive_messages: int = 10
    max_batch_entries: int = 10
    max_batch_bytes: int = MIB
    max_message_size: int = MIB          # upper bound for the MaximumMessageSize attribute
    max_message_attributes: int = 10
    max_queue_name_length: int = 80
    max_wait_seconds: int = 20
    max_visibility_timeout: int = 43_200
    max_delay_seconds: int = 900
    max_tags: int = 50

    @property
    def strict(self) -> bool:
        return self.name == "strict"


STRICT = Limits("strict")
RELAXED = Limits(
    "relaxed",
    max_receive_messages=1000,
    max_batch_entries=1000,
    max_batch_bytes=64 * MIB,
    max_message_size=64 * MIB,
    max_message_attributes=100,
    max_queue_name_length=256,
)


def by_name(name: str) -> Limits:
    try:
        return {"strict": STRICT, "relaxed": RELAXED}[name]
    except KeyError:
        raise ValueError(f"unknown limits profile {name!r} (strict or relaxed)") from None
