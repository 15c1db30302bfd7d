"""SQS semantics in memory, as a deterministic, replicable state machine.

Knows nothing of networks or clusters: ``Storage.execute(command) -> (result, mutations)``,
idempotent ``Storage.apply(mutation)``, ``snapshot()``/``restore()`` and ``digest()``.
"""

from storage.clock import Clock, ManualClock
from storage.engine import Storage
from storage.errors import SqsError
from storage.ids import IdSource
from storage.limits import RELAXED, STRICT, Limits

__all__ = ["Clock", "ManualClock", "Storage", "SqsError", "IdSource", "Limits", "STRICT", "RELAXED"]
