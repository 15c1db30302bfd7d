"""The console's HTTP routes (elasticmq_py/dashboard/console/__init__.py) on an embedded server:
logging in and out, the cookie, the checks every action passes (401 without a session, 403 for a
wrong CSRF token, another site or an address outside admin-from), each action and its audit line,
a read-only console without a secret, a replica's action executed by the master, and [admin]."""

from __future__ import annotations

import argparse
import http.client
import urllib.error
import json
import os
import re
import ssl

import pytest

from cluster.history import read_history
from cluster.node_actions import ForwardTo
from storage.commands import CreateQueue, Namespace, SendMessage

from elasticmq_py import cli, forwarding
from elasticmq_py.backend import LocalBackend
from elasticmq_py.config import Config, ConfigError, Tls
from elasticmq_py.dashboard.console import Console
from elasticmq_py.dashboard.console.actions import EXECUTE_PATH
from elasticmq_py.endpoint import Endpoint
from elasticmq_py.protocol.wire import HttpRequest
from elasticmq_py.reply import Reply
from elasticmq_py.server import Server
from storage import ManualClock

from tests.endpoint.certs import make_pki

SECRET = "an-admin-secret-of-some-length"
NS = Namespace()
QUEUE = {"region": "us-east-1", "account": "000000000000", "name": "orders"}
ACTIONS = {"SendMessage": {"MessageBody": "hello"}, "ReceiveMessage": {}, "PurgeQueue": {}, "DeleteQueue": {},
           "StartMessageMoveTask": {}, "CancelMessageMoveTask": {"TaskHandle": "x"}}


class Client:
    """A browser's requests, by hand: the cookie jar is one cookie, the origin this server's."""

    def __init__(self, server: Server, context: ssl.SSLContext | None = None):
        self.host = f"127.0.0.1:{server.port}"
        self.context = context
        self.cookie: str | None = None
        self.csrf: str | None = None

    def request(self, method: str, path: str, body: object = None, **headers: str) -> tuple[int, dict, dict]:
        h = {"Origin": f"http://{self.host}", "Sec-Fetch-Site": "same-origin", "Content-Type": "application/json"}
        if self.cookie:
            h["Cookie"] = self.cookie
        if self.csrf:
            h["X-CSRF-Token"] = self.csrf
        h.update({k.replace("_", "-"): v for k, v in headers.items()})
        h = {k: v for k, v in h.items() if v is not None}
        conn = (http.client.HTTPSConnection(self.host, context=self.context) if self.context
                else http.client.HTTPConnection(self.host))
        conn.request(method, path, None if body is None else json.dumps(body).encode(), h)
        r = conn.getresponse()
        raw = r.read()
        conn.close()
        return r.status, dict(r.getheaders()), json.loads(raw) if raw else {}

    def login(self, secret: str = SECRET) -> tuple[int, dict, dict]:
        status, headers, body = self.request("POST", "/ui/api/login", {"secret": secret})
        if status == 200:
            self.cookie = headers["Set-Cookie"].split(";", 1)[0]
            self.csrf = body["csrf"]
        return status, headers, body

    def act(self, action: str, params: dict | None = None, queue: dict = QUEUE, **headers: str):
        return self.request("POST", f"/ui/api/actions/{action}", {"queue": queue, "params": params or {}}, **headers)


@pytest.fixture
def server(tmp_path):
    cfg = Config(admin_secret=SECRET, history=str(tmp_path / "node.history.jsonl"))
    with Server(port=0, config=cfg) as s:
        yield s


def _audit(server: Server) -> list[dict]:
    return [e for e in read_history(server.config.history) if e["event"] == "console"]


# -- logging in --------------------------------------------------------------------------------------

def test_login_with_the_right_secret_sets_a_strict_http_only_cookie(server):
    c = Client(server)
    assert c.request("GET", "/ui/api/session")[2] == {
        "writable": True, "read_only_reason": None, "allowed": True, "peer": "127.0.0.1", "logged_in": False,
        "csrf": None, "expires": None}
    status, headers, body = c.login()
    assert status == 200 and body["ok"] and len(body["csrf"]) >= 40
    flags = [f.strip() for f in headers["Set-Cookie"].split(";")]
    assert flags[0].startswith("elasticmq_console=") and len(flags[0]) > 50
    assert set(flags[1:]) == {"Max-Age=3600", "Path=/ui", "HttpOnly", "SameSite=Strict"}, "no Secure on plain HTTP"
    session = c.request("GET", "/ui/api/session")[2]
    assert session["logged_in"] and session["csrf"] == c.csrf
    assert [(e["action"], e["outcome"], e["peer"]) for e in _audit(server)] == [("login", "ok", "127.0.0.1")]


def test_a_wrong_secret_is_refused_audited_and_throttled(server):
    c = Client(server)
    for _ in range(5):
        status, headers, body = c.login("wrong")
        assert status == 401 and "Set-Cookie" not in headers and body["error"]["message"] == "wrong secret"
    assert c.login()[0] == 429, "five failures within a minute: even the right secret waits"
    assert c.cookie is None
    events = _audit(server)
    assert [e["outcome"] for e in events] == ["refused"] * 6
    assert events[0]["error"] == "wrong secret" and "too many failed logins" in events[-1]["error"]
    server.endpoint.console.sessions.now = lambda: 10**10   # a minute later (and more)
    assert c.login()[0] == 200


def test_a_session_expires_and_logout_ends_it(server):
    c = Client(server)
    c.login()
    assert c.act("PurgeQueue")[0] == 400, "logged in: the action runs (the queue does not exist yet)"
    sessions = server.endpoint.console.sessions
    real_now = sessions.now
    sessions.now = lambda: real_now() + 3601
    assert c.act("PurgeQueue")[0] == 401
    assert c.request("GET", "/ui/api/session")[2]["logged_in"] is False
    sessions.now = real_now
    c.login()
    status, headers, _ = c.request("POST", "/ui/api/logout")
    assert status == 200 and headers["Set-Cookie"].startswith("elasticmq_console=; Max-Age=0; Path=/ui")
    assert c.act("PurgeQueue")[0] == 401


def test_the_cookie_is_secure_where_the_port_serves_tls(tmp_path):
    pki = make_pki(tmp_path)
    with Server(port=0, config=Config(admin_secret=SECRET, tls=Tls(str(pki.cert), str(pki.key)))) as s:
        c = Client(s, ssl.create_default_context(cafile=str(pki.ca)))
        status, headers, _ = c.login()
        assert status == 200 and "; Secure" in headers["Set-Cookie"]


# -- what every action needs -----------------------------------------------------------------------

@pytest.mark.parametrize("action", ACTIONS)
def test_every_action_needs_a_session_a_csrf_token_and_this_origin(server, action):
    c = Client(server)
    assert c.act(action, ACTIONS[action])[0] == 401
    c.login()
    token = c.csrf
    c.csrf = None
    assert c.act(action, ACTIONS[action])[0] == 403, "no CSRF token"
    c.csrf = ("y" if token[0] == "x" else "x") + token[1:]   # differs from the token in its first character
    assert c.act(action, ACTIONS[action])[0] == 403, "a wrong CSRF token"
    c.csrf = token
    assert c.act(action, ACTIONS[action], Origin="http://evil.example")[0] == 403
    assert c.act(action, ACTIONS[action], Sec_Fetch_Site="cross-site")[0] == 403
    assert c.act(action, ACTIONS[action], Sec_Fetch_Site="same-site")[0] == 403
    refused = [e for e in _audit(server) if e["action"] == action]
    assert len(refused) == 6 and {e["outcome"] for e in refused} == {"refused"} and refused[0]["queue"] == "orders"


def test_a_request_from_no_browser_needs_no_origin_but_still_the_token(server):
    c = Client(server)
    c.login()
    assert c.act("PurgeQueue", Origin=None, Sec_Fetch_Site=None)[0] == 400   # ran: no such queue
    c.csrf = None
    assert c.act("PurgeQueue", Origin=None, Sec_Fetch_Site=None)[0] == 403


def test_actions_and_logins_from_outside_admin_from_are_refused(tmp_path):
    cfg = Config(admin_secret=SECRET, admin_from=("10.0.0.0/8",), history=str(tmp_path / "h.jsonl"))
    with Server(port=0, config=cfg) as s:
        c = Client(s)
        status, _, body = c.login()
        assert status == 403 and "admin-from" in body["error"]["message"]
        assert c.request("GET", "/ui/api/session")[2]["allowed"] is False
        # a session opened from an allowed address is no use from here either
        c.cookie, c.csrf = "elasticmq_console=x", "y"
        sid, session = s.endpoint.console.sessions.login(SECRET, "10.1.2.3")
        c.cookie, c.csrf = f"elasticmq_console={sid}", session.csrf
        for action, params in ACTIONS.items():
            assert c.act(action, params)[0] == 403
        assert s.endpoint.console.sessions.get(sid) is not None
    assert len([e for e in read_history(cfg.history) if e["outcome"] == "refused"]) == 1 + len(ACTIONS)


def test_without_a_secret_the_console_is_read_only_and_says_so(tmp_path):
    with Server(port=0) as s:
        c = Client(s)
        session = c.request("GET", "/ui/api/session")[2]
        assert session["writable"] is False and "read-only" in session["read_only_reason"]
        status, _, body = c.login("anything at all, even empty")
        assert status == 403 and "read-only" in body["error"]["message"]
        assert c.act("PurgeQueue")[0] == 403
        assert c.request("GET", "/ui/api/queues")[0] == 200, "the read routes stay open"


def test_unknown_console_routes_and_actions(server):
    c = Client(server)
    c.login()
    assert c.request("POST", "/ui/api/actions/SetQueueAttributes", {"queue": QUEUE})[0] == 404
    assert c.request("POST", "/ui/api/actions/Tick", {"queue": QUEUE})[0] == 404
    assert c.request("POST", "/ui/api/nothing", {})[0] == 404
    assert c.request("GET", "/ui/api/actions/PurgeQueue")[0] == 405
    assert c.request("GET", "/ui/static/nothing.js")[0] == 404
    assert c.request("POST", "/ui/api/actions/PurgeQueue", {"no": "queue"})[0] == 400
    # the master's side of a forwarded action is for members only: a client reaching it is told no
    assert c.request("POST", EXECUTE_PATH, {}, X_Amz_Target="AmazonSQS.PurgeQueue")[0] == 404


# -- the actions themselves -------------------------------------------------------------------------

def test_each_action_runs_as_sqs_and_lands_in_the_history(server):
    server.execute(CreateQueue(NS, "orders-dlq", {}, {}))
    server.execute(CreateQueue(NS, "orders", {"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": NS.key("orders-dlq").arn, "maxReceiveCount": 1})}, {}))
    for i in range(2):
        server.execute(SendMessage(NS.key("orders-dlq"), f"dead {i}"))
    c = Client(server)
    c.login()
    status, _, body = c.act("SendMessage", {"MessageBody": "test", "MessageAttributes": {
        "origin": {"DataType": "String", "StringValue": "console"}}})
    assert status == 200 and body["ok"] and body["via"] is None and len(body["output"]["MessageId"]) == 36
    status, _, body = c.act("ReceiveMessage", {"MaxNumberOfMessages": 10, "VisibilityTimeout": 600})
    [m] = body["output"]["Messages"]
    assert m["Body"] == "test" and m["MessageAttributes"]["origin"]["StringValue"] == "console"
    assert m["Attributes"]["ApproximateReceiveCount"] == "1" and "SentTimestamp" in m["Attributes"]
    assert server.backend.queue_stats()[NS.key("orders")] == (1, 0, 0), "a peek leaves the message visible"
    assert c.act("PurgeQueue")[0] == 200 and server.backend.queue_stats()[NS.key("orders")] == (0, 0, 0)

    dlq = dict(QUEUE, name="orders-dlq")
    status, _, body = c.act("StartMessageMoveTask", {"MaxNumberOfMessagesPerSecond": 1}, queue=dlq)
    assert status == 200 and body["output"]["TaskHandle"]
    assert c.act("CancelMessageMoveTask", {"TaskHandle": body["output"]["TaskHandle"]}, queue=dlq)[0] == 200
    status, _, body = c.act("StartMessageMoveTask", {}, queue=dlq)
    assert status == 200
    assert c.act("DeleteQueue")[0] == 200 and NS.key("orders") not in server.backend.queue_stats()

    done = [(e["action"], e["queue"], e["outcome"]) for e in _audit(server) if e["action"] != "login"]
    assert done == [("SendMessage", "orders", "ok"), ("ReceiveMessage", "orders", "ok"), ("PurgeQueue", "orders", "ok"),
                    ("StartMessageMoveTask", "orders-dlq", "ok"), ("CancelMessageMoveTask", "orders-dlq", "ok"),
                    ("StartMessageMoveTask", "orders-dlq", "ok"), ("DeleteQueue", "orders", "ok")]
    assert all(e["peer"] == "127.0.0.1" and e["node"] == "local" for e in _audit(server))
    events = c.request("GET", "/ui/api/activity")[2]["events"]
    assert [e["action"] for e in events if e["event"] == "console"][-1] == "DeleteQueue", "the dashboard lists them"


def test_an_action_that_fails_fails_as_sqs_and_is_audited(server):
    c = Client(server)
    c.login()
    status, _, body = c.act("SendMessage", {"MessageBody": "x"})
    assert status == 400 and body == {"ok": False, "via": None, "error": {
        "code": "QueueDoesNotExist", "message": "The specified queue does not exist."}}
    [e] = [e for e in _audit(server) if e["action"] == "SendMessage"]
    assert e["outcome"] == "failed" and e["error"] == "QueueDoesNotExist"


# -- on a replica --------------------------------------------------------------------------------------

class _Replica(LocalBackend):
    """A member that routes client requests to the master ``to``, through forwarding's encoding."""

    def __init__(self, to: Endpoint):
        super().__init__(ManualClock(0))
        self.to = to

    def route(self):
        return ForwardTo("m1")

    def forward(self, req, done):
        wire = forwarding.decode_request(forwarding.encode_request(req))
        self.to.handle_forwarded(wire, lambda resp: done(forwarding.decode_response(forwarding.encode_response(resp)), None))


def test_a_replicas_action_is_executed_by_the_master():
    master = Endpoint(LocalBackend(ManualClock(0)))
    master.backend.execute_now(CreateQueue(NS, "orders", {}, {}))
    replica = Endpoint(_Replica(master), console=Console(SECRET, ("127.0.0.0/8",), False))
    sid, session = replica.console.sessions.login(SECRET, "127.0.0.1")
    answers = []

    def act(action: str, params: dict) -> dict:
        headers = {"cookie": f"elasticmq_console={sid}", "x-csrf-token": session.csrf, "host": "r:1"}
        body = json.dumps({"queue": QUEUE, "params": params}).encode()
        replica.handle(HttpRequest("POST", f"/ui/api/actions/{action}", b"", headers, body, "127.0.0.1"),
                       Reply(answers.append))
        return json.loads(answers[-1].body)

    sent = act("SendMessage", {"MessageBody": "via the master"})
    assert sent["ok"] and sent["via"] == "m1"
    assert master.backend.queue_stats()[NS.key("orders")] == (1, 0, 0)
    assert NS.key("orders") not in replica.backend.queue_stats(), "nothing ran on the replica itself"
    failed = act("SendMessage", {"MessageBody": ""})
    assert not failed["ok"] and failed["via"] == "m1"
    # the error an SQS client gets for the same request from the master's SQS endpoint
    master.handle(HttpRequest("POST", "/", b"", {"x-amz-target": "AmazonSQS.SendMessage", "host": "m:1"},
                              b'{"QueueUrl": "http://m:1/000000000000/orders", "MessageBody": ""}'), Reply(answers.append))
    sqs = json.loads(answers[-1].body)
    assert answers[-1].status == 400
    assert failed["error"] == {"code": sqs["__type"].rpartition("#")[2], "message": sqs["message"]}


def test_a_forwarded_action_on_a_node_that_is_not_the_master_is_refused():
    class _NotMaster(LocalBackend):
        def route(self):
            return ForwardTo("elsewhere")
    node = Endpoint(_NotMaster(ManualClock(0)))
    answers = []
    node.handle_forwarded(HttpRequest("POST", EXECUTE_PATH, b"", {"x-amz-target": "AmazonSQS.PurgeQueue",
                                                                   "x-elasticmq-namespace": "us-east-1/000000000000"},
                                      b'{"QueueUrl": "orders"}'), answers.append)
    assert answers[0].status == 503 and b"ServiceUnavailable" in answers[0].body


# -- [admin] ---------------------------------------------------------------------------------------------

def test_the_admin_section(tmp_path):
    (tmp_path / "admin.secret").write_text(SECRET + "\n")
    path = tmp_path / "node.toml"
    path.write_text('[admin]\nsecret-file = "admin.secret"\nfrom = ["10.0.0.0/8"]\nhistory = "n.jsonl"\n')
    cfg = Config.from_toml(path)
    assert (cfg.admin_secret, cfg.admin_from, cfg.history) == (SECRET, ("10.0.0.0/8",), str(tmp_path / "n.jsonl"))
    assert Config.from_dict({}).admin_secret is None


ONE_MEMBER = {"self": "n1", "secret": "s", "nodes": [{"name": "n1", "raft": "127.0.0.1:1", "stream": "127.0.0.1:2"}]}


@pytest.mark.parametrize("doc, msg", [
    ({"admin": {"secret": SECRET, "secret-file": "f"}}, "secret or secret-file, not both"),
    ({"admin": {"secret": "short"}}, "at least 16 characters"),
    ({"admin": {"secret-file": "/nonexistent/secret"}}, "secret-file"),
    ({"admin": {"from": ["not an address"]}}, "admin-from"),
    ({"admin": {"frm": []}}, "unknown key(s) frm"),
    ({"admin": {"from": ["10.0.0.0/8"]}, "cluster": dict(ONE_MEMBER, **{"admin-from": ["10.0.0.0/8"]})}, "keep one"),
    ({"admin": {"history": "h.jsonl"}, "cluster": ONE_MEMBER}, "[cluster] history"),
])
def test_admin_section_errors_are_clear(doc, msg):
    with pytest.raises(ConfigError, match=re.escape(msg)):
        Config.from_dict(doc)


def test_on_a_cluster_member_admin_secret_replaces_the_cluster_secret_for_console_and_admin_routes(tmp_path):
    import time
    import urllib.request

    from elasticmq_py import localcluster

    [me] = plan = localcluster.plan_ports(1, 0)
    localcluster.write_configs(tmp_path, plan, "majority", True, fsync=None)
    cluster_secret = (tmp_path / "secret").read_text().strip()
    path = tmp_path / f"{me.name}.toml"
    path.write_text(path.read_text() + f'\n[admin]\nsecret = "{SECRET}"\n')
    with Server(config=Config.from_toml(path)) as s:
        deadline = time.monotonic() + 20
        while s.backend.status().master is None or not s.backend.status().active:
            assert time.monotonic() < deadline, "the one-member cluster never served"
            time.sleep(0.05)
        c = Client(s)
        assert c.login(cluster_secret)[0] == 401
        assert c.login()[0] == 200
        c.act("SendMessage", {"MessageBody": "x"})

        def step_down(secret: str) -> int:
            req = urllib.request.Request(f"http://127.0.0.1:{s.port}/cluster/step-down", b"{}", method="POST",
                                         headers={"X-Cluster-Secret": secret})
            try:
                return urllib.request.urlopen(req).status
            except urllib.error.HTTPError as e:
                return e.code
        assert step_down(cluster_secret) == 401
        assert step_down(SECRET) == 409, "accepted, and refused for a reason of its own: no follower"
        assert cli._secret(argparse.Namespace(config=str(path))) == SECRET, "the CLI's --config takes it too"
    audit = [(e["action"], e["outcome"]) for e in read_history(str(tmp_path / f"{me.name}.history.jsonl"))
             if e["event"] == "console"]
    assert audit == [("login", "refused"), ("login", "ok"), ("SendMessage", "failed")], "in the [cluster] history"


def test_a_node_that_fails_to_start_closes_its_history_file(tmp_path):
    history = tmp_path / "node.history.jsonl"
    with Server(port=0) as taken:
        node = Server(port=taken.port, config=Config(admin_secret=SECRET, history=str(history)))
        with pytest.raises(OSError):
            node.start()
    assert history.exists(), "the file was opened before the port was found taken"
    open_files = {os.path.realpath(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")}
    assert str(history.resolve()) not in open_files, "and closed again"
