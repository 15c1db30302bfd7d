"""``queue_key_of`` judged by the full parse: what the endpoint's own parse makes of a request (the
command it hands its backend, or the error it answers) against what the cheap reading says the
request's queue is. Shared by tests/endpoint/test_queue_key.py and the conformance corpus's
server fixture, which replays every request of the corpus through it."""

from __future__ import annotations

from storage.clock import ManualClock
from storage.commands import CreateQueue, GetQueueUrl, QueueKey
from storage.keys import command_key

from elasticmq_py.backend import LocalBackend
from elasticmq_py.endpoint import Endpoint, EndpointConfig
from elasticmq_py.protocol.queue_key import queue_key_of
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.reply import Reply

ERROR = "error"   # the full parse refused the request


class _Parsed(LocalBackend):
    """Takes the command the endpoint parsed; executes nothing."""

    def execute(self, command, done) -> None:
        self.command = command


def full_parse(endpoint: Endpoint, req: HttpRequest) -> QueueKey | str | None:
    """The queue the command the endpoint's SQS path builds for ``req`` is routed by (its
    ``command_key``: the queue it acts on, a move task's source queue), or ERROR where it answers
    an error instead. None for a command on no single queue, and for the two whose queue
    ``queue_key_of`` leaves to the full parse by design: a CreateQueue's name, still to be
    placed, and a GetQueueUrl's name and owner, to be looked up."""
    backend = endpoint.backend
    backend.command = None
    answers = []
    endpoint._sqs(req, Reply(answers.append))
    command = backend.command
    if command is None:
        assert answers and answers[0].status >= 400, answers
        return ERROR
    return None if type(command) in (CreateQueue, GetQueueUrl) else command_key(command)


def parser(config: EndpointConfig = EndpointConfig()) -> Endpoint:
    return Endpoint(_Parsed(ManualClock(0)), config)


def disagreements(requests: list[HttpRequest], config: EndpointConfig = EndpointConfig()) -> tuple[list[str], int]:
    """Where ``queue_key_of`` and the full parse disagree, and how many requests named a queue.
    Agreement: a request whose command is on a queue gets that queue's key; one whose command is
    on none gets None; one the full parse refuses may get either (its error does not depend on
    which member answers it)."""
    endpoint = parser(config)
    wrong, keyed = [], 0
    for req in requests:
        full = full_parse(endpoint, req)
        cheap = queue_key_of(req, config.region, config.account_id)
        if full == ERROR:
            continue
        keyed += full is not None
        if cheap != full:
            wrong.append(f"{req.method} {req.path} {req.query[:200]!r} {req.body[:300]!r}: "
                         f"queue_key_of {cheap}, full parse {full}")
    return wrong, keyed
