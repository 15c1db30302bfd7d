"""The endpoint with replication groups: each request is routed, executed or forwarded in its
queue's group. A scripted backend stands for ClusterBackend (elasticmq_py/clustered.py): three
groups, each a LocalBackend, of which this node masters the ones in ``local``; the process tests
(tests/cluster/test_groups_process.py) run the real one."""

from __future__ import annotations

import json

from storage.clock import ManualClock
from storage.commands import CreateQueue, Namespace
from storage.keys import command_key, task_handle

from cluster.node_actions import LOCAL, ForwardTo, Refuse
from cluster.status import NodeStatus

from elasticmq_py.backend import LocalBackend
from elasticmq_py.cli import format_status
from elasticmq_py.dashboard.console import actions as console
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.health import Role, from_routes
from elasticmq_py.protocol.wire import HttpRequest, HttpResponse
from elasticmq_py.reply import Reply

ACCOUNT = "000000000000"
FORWARDED = HttpResponse(200, (("Content-Type", "application/x-amz-json-1.0"),), b'{"forwarded": true}')


class GroupedBackend:
    groups = 3

    def __init__(self, local: set[int], refused: set[int] = frozenset()) -> None:
        clock = ManualClock(1_000_000)
        self.stores = [LocalBackend(clock) for _ in range(self.groups)]
        self.local, self.refused = local, refused
        self.directory: dict[tuple[str, str, str], int] = {}
        self.calls: list[tuple] = []
        self.placing: list = []
        self.asked: list = []     # request_group's questions: (queue name, creates)

    def route(self, group: int = 0):
        if group in self.local:
            return LOCAL
        if group in self.refused:
            return Refuse(f"group {group} has no master.")
        return ForwardTo(f"m{group}")

    def execute(self, command, done, group=None) -> None:
        if group is None:
            group = self.request_group(command_key(command))
        self.calls.append(("execute", type(command).__name__, group))
        self.stores[group].execute(command, done)

    def forward(self, req, done, group: int = 0) -> None:
        params = json.loads(req.body)
        named = params.get("QueueUrl") or params.get("SourceArn") or params.get("QueueName") or "TaskHandle"
        self.calls.append(("forward", named.replace(":", "/").rsplit("/", 1)[-1], group))
        done(FORWARDED, None)

    def request_group(self, key, creates=False):
        """As the node core answers (NodeCore.request_group, tests/cluster/test_placement_waits.py)."""
        self.asked.append((key and key.name, creates))
        group = self.directory.get((key.region, key.account, key.name)) if key is not None else 0
        return 0 if group is None and not creates else group

    def place(self, key, done) -> None:
        self.calls.append(("place", key.name))
        self.placing.append((key, done))

    def queue_stats(self):
        return {}

    def waiting_receives(self) -> int:
        return 0

    def now_ms(self) -> int:
        return 1_000_000


def _call(endpoint: Endpoint, action: str, **params) -> list[HttpResponse]:
    answers: list[HttpResponse] = []
    req = HttpRequest("POST", "/", b"", {"x-amz-target": f"AmazonSQS.{action}", "host": "localhost:9324",
                                         "content-type": "application/x-amz-json-1.0"},
                      json.dumps(params).encode())
    endpoint.handle(req, Reply(answers.append))
    return answers


def _url(name: str) -> str:
    return f"http://localhost:9324/{ACCOUNT}/{name}"


def _mine_and_theirs() -> tuple[GroupedBackend, Endpoint]:
    """A node that masters group 1, which holds "mine"; "theirs" is in group 2."""
    b = GroupedBackend(local={1})
    b.directory[("us-east-1", ACCOUNT, "mine")] = 1
    b.directory[("us-east-1", ACCOUNT, "theirs")] = 2
    b.stores[1].execute_now(CreateQueue(Namespace("us-east-1", ACCOUNT), "mine"))
    return b, Endpoint(b)


def test_a_request_runs_in_its_queues_group_or_is_forwarded_there():
    b, e = _mine_and_theirs()
    [ok] = _call(e, "SendMessage", QueueUrl=_url("mine"), MessageBody="x")
    assert ok.status == 200 and b.calls == [("execute", "SendMessage", 1)]
    b.calls.clear()
    [fwd] = _call(e, "SendMessage", QueueUrl=_url("theirs"), MessageBody="x")
    assert fwd is FORWARDED and b.calls == [("forward", "theirs", 2)]


def test_no_queue_or_an_unknown_one_goes_to_group_0():
    b = GroupedBackend(local={0})
    e = Endpoint(b)
    [listed] = _call(e, "ListQueues")
    assert listed.status == 200 and b.calls == [("execute", "ListQueues", 0)]
    b.calls.clear()
    [missing] = _call(e, "SendMessage", QueueUrl=_url("nowhere"), MessageBody="x")
    assert b.calls == [("execute", "SendMessage", 0)]
    assert missing.status == 400 and b"QueueDoesNotExist" in missing.body


def test_create_queue_of_a_new_name_waits_for_its_placement():
    b = GroupedBackend(local={2})
    e = Endpoint(b)
    answers = _call(e, "CreateQueue", QueueName="fresh")
    assert answers == [] and b.calls == [("place", "fresh")]     # no answer before Raft placed it
    key, done = b.placing.pop()
    b.directory[(key.region, key.account, key.name)] = 2
    done(2)
    assert answers[0].status == 200 and b.calls[-1] == ("execute", "CreateQueue", 2)
    assert b.stores[2].storage.queue_stats() and not b.stores[0].storage.queue_stats()

    # placed in a group another member masters: forwarded there, with that group
    later = _call(e, "CreateQueue", QueueName="elsewhere")
    b.placing.pop()[1](0)
    assert later == [FORWARDED] and b.calls[-1] == ("forward", "elsewhere", 0)


def test_a_move_task_action_runs_in_its_source_queues_group():
    # A move task's source is named by its ARN, or by the task's handle (storage/keys.py): the
    # action runs where that queue lives, read cheaply or after the full parse alike.
    b, e = _mine_and_theirs()
    mine, theirs = (f"arn:aws:sqs:us-east-1:{ACCOUNT}:{q}" for q in ("mine", "theirs"))
    [listed] = _call(e, "ListMessageMoveTasks", SourceArn=mine)
    assert listed.status == 200 and b.calls == [("execute", "ListMessageMoveTasks", 1)]
    assert b.asked == [("mine", False)]
    assert _call(e, "StartMessageMoveTask", SourceArn=theirs) == [FORWARDED]
    assert _call(e, "CancelMessageMoveTask", TaskHandle=task_handle("t-1", theirs)) == [FORWARDED]
    assert b.calls[1:] == [("forward", "theirs", 2), ("forward", "TaskHandle", 2)]
    # a source no group holds, or none at all: group 0, whose master answers the error
    b.calls.clear()
    _call(e, "StartMessageMoveTask", SourceArn=f"arn:aws:sqs:us-east-1:{ACCOUNT}:nowhere")
    _call(e, "CancelMessageMoveTask", TaskHandle="not a handle")
    assert b.calls == [("forward", "nowhere", 0), ("forward", "TaskHandle", 0)]


def test_a_placement_not_committed_in_time_is_a_retryable_503():
    b = GroupedBackend(local={0})
    answers = _call(Endpoint(b), "CreateQueue", QueueName="late")
    b.placing.pop()[1](None)
    assert answers[0].status == 503 and b"ServiceUnavailable" in answers[0].body
    assert b"not executed; retry" in answers[0].body


def test_a_group_without_a_master_is_refused_with_a_503_naming_it():
    b = GroupedBackend(local={0}, refused={1})
    b.directory[("us-east-1", ACCOUNT, "stuck")] = 1
    [refused] = _call(Endpoint(b), "SendMessage", QueueUrl=_url("stuck"), MessageBody="x")
    assert refused.status == 503 and b"group 1 has no master" in refused.body and b.calls == []


def test_a_forwarded_request_runs_in_the_group_its_forwarder_routed_it_to():
    b = GroupedBackend(local={0, 1, 2})
    e = Endpoint(b)
    # the master may not have learnt the placement yet: the forwarder's group is the one
    answers: list[HttpResponse] = []
    req = HttpRequest("POST", "/", b"", {"x-amz-target": "AmazonSQS.CreateQueue", "host": "localhost:9324"},
                      b'{"QueueName": "routed"}')
    e.handle_forwarded(req, answers.append, 2)
    assert answers[0].status == 200 and b.calls == [("execute", "CreateQueue", 2)]


def test_health_answers_for_every_group():
    routes = [LOCAL, ForwardTo("n2"), ForwardTo("n3")]
    h = from_routes("n1", routes, Role.ANY, ["n1", "n2", "n3"], None)
    assert h.status_code == 200 and h.to_json()["groups"][1] == {"group": 1, "serves": "forwarding", "master": "n2"}
    assert from_routes("n1", routes, Role.MASTER, ["n1", "n2", "n3"], None).status_code == 200
    down = from_routes("n1", [LOCAL, Refuse("no master for group 1."), ForwardTo("n3")], Role.ANY,
                       ["n1", None, "n3"], None)
    assert down.status_code == 503 and down.reason == "no master for group 1."
    follower = from_routes("n2", [ForwardTo("n1")] * 3, Role.MASTER, ["n1"] * 3, None)
    assert follower.status_code == 503
    odd = from_routes("n1", routes, Role.ANY, ["n1", "n2", "n3"], "cluster has groups = 2, this node 3")
    assert odd.status_code == 503 and "groups = 2" in odd.reason


def test_a_console_action_goes_to_its_queues_group():
    b, e = _mine_and_theirs()
    ns = Namespace("us-east-1", ACCOUNT)
    got: list = []
    for name in ("mine", "theirs"):
        body = json.dumps({"QueueUrl": _url(name), "MessageBody": "x"}).encode()
        console.execute(e, "SendMessage", body, ns, "localhost:9324", lambda resp, master: got.append((resp, master)))
    assert got[0][0].status == 200 and got[0][1] is None and got[1] == (FORWARDED, "m2")
    assert b.calls == [("execute", "SendMessage", 1), ("forward", "theirs", 2)]
    # on the master, the forwarded action runs in the group it was routed to
    b.local = {2}
    b.stores[2].execute_now(CreateQueue(ns, "theirs"))
    answers: list[HttpResponse] = []
    req = HttpRequest("POST", console.EXECUTE_PATH, b"",
                      {"x-amz-target": "AmazonSQS.SendMessage", console.NS_HEADER: f"us-east-1/{ACCOUNT}"},
                      json.dumps({"QueueUrl": _url("theirs"), "MessageBody": "y"}).encode())
    e.handle_forwarded(req, answers.append, 2)
    assert answers[0].status == 200 and b.calls[-1] == ("execute", "SendMessage", 2)


def test_a_console_redrive_goes_to_its_source_queues_group():
    b, e = _mine_and_theirs()
    got: list = []
    body = json.dumps({"SourceArn": f"arn:aws:sqs:us-east-1:{ACCOUNT}:theirs"}).encode()
    console.execute(e, "StartMessageMoveTask", body, Namespace("us-east-1", ACCOUNT), "localhost:9324",
                    lambda resp, master: got.append((resp, master)))
    assert got == [(FORWARDED, "m2")] and b.calls == [("forward", "theirs", 2)]


def test_status_shows_a_groups_mismatch_only_when_there_is_one():
    assert "groups_mismatch" not in NodeStatus(node="n1").to_dict()   # the form one group always had
    odd = NodeStatus(node="n1", groups_mismatch="cluster has groups = 3, this node 1")
    assert NodeStatus.from_dict(odd.to_dict()) == odd
    assert "GROUPS MISMATCH: cluster has groups = 3, this node 1" in format_status(odd)
