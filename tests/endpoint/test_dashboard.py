"""The dashboard's JSON routes and their parts, without a browser (the page in Chromium:
test_dashboard_browser.py): the queue page over 10,000 queues, dead-letter queues as SQS's
RedrivePolicy names them, request counts, and the history tail."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request

import pytest

from elasticmq_py.dashboard import history_tail
from elasticmq_py.dashboard.history_tail import HistoryTail
from elasticmq_py.dashboard.queues import MAX_LIMIT, QueueQuery, queue_page
from elasticmq_py.server import Server
from storage.commands import CreateQueue, Namespace, QueueKey

NS = Namespace()


def _key(name: str, region: str = "us-east-1") -> QueueKey:
    return QueueKey(region, "000000000000", name)


def _get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


# -- the queue page ---------------------------------------------------------------------------------

STATS = {_key("b"): (5, 1, 0), _key("a"): (0, 0, 0), _key("c"): (5, 0, 2), _key("a", "eu-west-1"): (1, 0, 0),
         _key("b-dlq"): (3, 0, 0)}


def test_the_queue_page_filters_sorts_and_pages():
    page = queue_page(STATS, {}, QueueQuery(), "http://h:1")
    assert [(q["name"], q["region"]) for q in page["queues"]] == [
        ("a", "eu-west-1"), ("a", "us-east-1"), ("b", "us-east-1"), ("b-dlq", "us-east-1"), ("c", "us-east-1")]
    assert page["totals"] == {"visible": 14, "inflight": 1, "delayed": 2, "with_dlq": 0, "dlqs": 0}
    assert page["queues"][2]["url"] == "http://h:1/000000000000/b"
    total = queue_page(STATS, {}, QueueQuery(sort="total"), "")
    assert [q["name"] for q in total["queues"]][:3] == ["c", "b", "b-dlq"], "largest first, ties by name"
    assert [q["name"] for q in queue_page(STATS, {}, QueueQuery(sort="visible"), "")["queues"]][:3] == ["b", "c", "b-dlq"]
    second = queue_page(STATS, {}, QueueQuery(offset=2, limit=2), "")
    assert [q["name"] for q in second["queues"]] == ["b", "b-dlq"] and second["matched"] == 5
    found = queue_page(STATS, {}, QueueQuery(filter="b"), "")
    assert [q["name"] for q in found["queues"]] == ["b", "b-dlq"] and found["matched"] == 2
    assert found["total_queues"] == 5 and found["totals"]["visible"] == 14, "totals cover every queue"
    assert queue_page(STATS, {}, QueueQuery(offset=99), "")["queues"] == []


def test_the_queue_page_names_dead_letter_queues():
    dlqs = {_key("b"): _key("b-dlq"), _key("c"): _key("gone")}
    rows = {q["name"]: q for q in queue_page(STATS, dlqs, QueueQuery(), "")["queues"] if q["region"] == "us-east-1"}
    assert rows["b"]["dlq"] == {"name": "b-dlq", "exists": True, "same_namespace": True}
    assert rows["c"]["dlq"]["exists"] is False
    assert rows["b-dlq"]["dlq_for"] == 1 and rows["a"]["dlq"] is None


@pytest.mark.parametrize("params, error", [
    ({"limit": str(MAX_LIMIT + 1)}, "limit must be between 1 and 500"),
    ({"limit": "0"}, "limit must be between"),
    ({"offset": "-1"}, "offset must be between"),
    ({"offset": "ten"}, "offset must be an integer"),
    ({"sort": "size"}, "sort must be one of"),
])
def test_queue_query_refuses_what_it_cannot_use(params, error):
    with pytest.raises(ValueError, match=error):
        QueueQuery.parse(params)


def test_queue_query_defaults_and_filter():
    assert QueueQuery.parse({}) == QueueQuery()
    assert QueueQuery.parse({"filter": "  Orders ", "sort": "delayed", "offset": "50", "limit": "10"}) == \
        QueueQuery(50, 10, "orders", "delayed")


# -- the history tail ---------------------------------------------------------------------------------

def _line(event: str, **fields) -> str:
    return json.dumps({"ts": 1.5, "node": "n1", "event": event, **fields}, separators=(",", ":")) + "\n"


def test_the_history_tail_reads_only_what_was_appended_and_skips_per_operation_lines(tmp_path):
    path = tmp_path / "n1.history.jsonl"
    path.write_text(_line("started") + _line("op", action="SendMessage") + _line("view", view_id=1))
    tail = HistoryTail(str(path), keep=3)
    assert [e["event"] for e in tail.read()] == ["started", "view"]
    with open(path, "a") as f:
        f.write(_line("replication", epoch=1) + _line("activated", reason="r") + '{"ts":2,"node":"n1","ev')
    assert [e["event"] for e in tail.read()] == ["started", "view", "activated"], "a line being written waits"
    with open(path, "a") as f:
        f.write('ent":"synced","epoch":1}\n' + _line("transfer_finished"))
    assert [e["event"] for e in tail.read()] == ["activated", "synced", "transfer_finished"], "the last 3 kept"
    path.write_text(_line("started", restarted=True))      # a new file in its place
    assert [e.get("restarted") for e in tail.read()] == [True]


def test_the_history_tail_of_a_long_file_starts_near_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(history_tail, "MAX_READ", 1000)
    path = tmp_path / "h.jsonl"
    path.write_text("".join(_line("view", view_id=i) for i in range(200)))
    events = HistoryTail(str(path), keep=500).read()
    ids = [e["view_id"] for e in events]
    assert ids[-1] == 199 and len(ids) < 20 and ids == list(range(ids[0], 200)), "whole lines only, newest kept"
    assert HistoryTail(str(tmp_path / "missing.jsonl")).read() == []


# -- the routes on a real server ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server():
    with Server(port=0) as s:
        for i in range(10_000):
            s.execute(CreateQueue(NS, f"q-{i:05d}", {}, {}))
        s.execute(CreateQueue(NS, "orders-dlq", {}, {}))
        policy = json.dumps({"deadLetterTargetArn": NS.key("orders-dlq").arn, "maxReceiveCount": 3})
        s.execute(CreateQueue(NS, "orders", {"RedrivePolicy": policy}, {}))
        yield s


def test_ten_thousand_queues_come_a_page_at_a_time(server):
    code, headers, body = _get(server.endpoint_url + "/ui/api/queues")
    page = json.loads(body)
    assert code == 200 and headers["Content-Type"] == "application/json"
    assert page["total_queues"] == 10_002 and len(page["queues"]) == 50 and page["queues"][0]["name"] == "orders"
    assert len(body) < 20_000, "a page's size does not grow with the number of queues"
    page = json.loads(_get(server.endpoint_url + "/ui/api/queues?offset=9950&limit=500&filter=q-0")[2])
    assert page["matched"] == 10_000 and [q["name"] for q in page["queues"]][:1] == ["q-09950"]
    assert len(page["queues"]) == 50
    code, _, body = _get(server.endpoint_url + "/ui/api/queues?limit=100000")
    assert code == 400 and "limit must be between 1 and 500" in json.loads(body)["error"]


def test_a_redrive_policy_shows_as_the_queues_dead_letter_queue(server):
    page = json.loads(_get(server.endpoint_url + "/ui/api/queues?filter=orders")[2])
    rows = {q["name"]: q for q in page["queues"]}
    assert rows["orders"]["dlq"] == {"name": "orders-dlq", "exists": True, "same_namespace": True}
    assert rows["orders-dlq"]["dlq_for"] == 1 and page["totals"]["with_dlq"] == 1


def test_activity_counts_the_requests_this_node_answered(server):
    import boto3

    before = json.loads(_get(server.endpoint_url + "/ui/api/activity")[2])
    assert before["history"] is None and before["events"] == [] and before["members_http"] == {}
    sqs = boto3.client("sqs", endpoint_url=server.endpoint_url, region_name="us-east-1",
                       aws_access_key_id="x", aws_secret_access_key="x")
    url = sqs.get_queue_url(QueueName="q-00001")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="a")
    sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": "1", "MessageBody": "b"}])
    sqs.receive_message(QueueUrl=url)
    with pytest.raises(sqs.exceptions.QueueDoesNotExist):
        sqs.get_queue_url(QueueName="no-such-queue")
    after = json.loads(_get(server.endpoint_url + "/ui/api/activity")[2])
    diff = {k: after["requests"][k] - before["requests"][k] for k in before["requests"]}
    assert diff == {"all": 5, "errors": 1, "send": 2, "receive": 1, "delete": 0}
    assert after["at"] >= before["at"]


@pytest.mark.parametrize("path, assets", [
    ("/ui", [b"/ui/static/console.js", b"/ui/static/dashboard.css", b"/ui/static/dashboard.js", b"/ui/static/page.js"]),
    ("/ui/queue", [b"/ui", b"/ui/static/console.js", b"/ui/static/dashboard.css", b"/ui/static/page.js",
                   b"/ui/static/queue.js"]),
])
def test_the_page_and_its_assets_come_from_the_node_alone(server, path, assets):
    code, headers, page = _get(server.endpoint_url + path)
    assert code == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    refs = re.findall(rb'(?:src|href)="([^"]+)"', page)
    assert sorted(refs) == assets
    for ref in assets:
        if ref == b"/ui":
            continue   # the overview, tested above
        ctype = "text/css" if ref.endswith(b".css") else "text/javascript"
        code, headers, body = _get(server.endpoint_url + ref.decode())
        assert code == 200 and headers["Content-Type"].startswith(ctype) and body
        # nothing is loaded from elsewhere (the one URL in the script is the SVG namespace's name)
        assert re.findall(rb"https?://[^\s\"']+", body) in ([], [b"http://www.w3.org/2000/svg"])
        assert b"@import" not in body and b"url(" not in body
        assert b"innerHTML" not in body, "names from clients are written as text, never as markup"
