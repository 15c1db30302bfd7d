"""How a replicated operation can fail, as the node core reports it to the runtimes."""

from __future__ import annotations


class NotServing(RuntimeError):
    """This node does not accept the operation now (not the active master, or synchronising):
    nothing was executed, so the client may retry anywhere."""


class Throttled(RuntimeError):
    """A reachable replica lags beyond the configured bound: producers must slow down."""


class OutcomeUnknown(RuntimeError):
    """The operation was executed and maybe streamed, but never met its ack policy here: it may
    survive or not, so the client gets a retryable error, never a success."""


class MasterChanged(OutcomeUnknown):
    """The view changed (or the node lost its quorum for good) before the policy was met."""


class NotStored(OutcomeUnknown):
    """This node's journal failed (a full disk, a failed fsync): the operation was not made
    durable as its policy promises. Retryable; the node serves nothing until restarted."""
