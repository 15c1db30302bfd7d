"""The fixtures of the storage tests: ``env`` (message-level) and ``sqs`` (queue-level)."""

from __future__ import annotations

import pytest

from tests.storage.message_env import Env
from tests.storage.queue_env import Sqs
from tests.storage.workload import assert_indexes_consistent


@pytest.fixture
def env():
    e = Env()
    yield e
    assert e.replica.digest() == e.storage.digest(), "a replica applying the emitted mutations diverged"
    assert_indexes_consistent(e.storage)
    assert_indexes_consistent(e.replica)


@pytest.fixture
def sqs() -> Sqs:
    return Sqs()
