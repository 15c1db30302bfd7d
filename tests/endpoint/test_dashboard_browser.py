"""The dashboard in a real browser (headless Chromium, tests/endpoint/browser.py).

Against a live 3-node cluster of real processes (elasticmq-py's own local-cluster launcher), the
page served by a replica shows the master and every member, and a queue's counts follow sends and
receives; after kill -9 of the master it shows the new master, the dead one's link down, and
counts that survived the failover. Against a single node holding 10,000 queues it stays a page of
50, which the filter, the sort and the pager move through. Screenshots go to tests/artifacts/.
"""

from __future__ import annotations


import pytest

from storage.commands import CreateQueue, Namespace, SendMessage
from tests.endpoint.browser import screenshot, text_of, wait_until
from tests.endpoint.conftest import local_cluster, sqs_client

pytestmark = pytest.mark.slow


def _counts(driver, queue: str) -> tuple[str, str, str]:
    row = f'#queues tr[data-queue="{queue}"]'
    return text_of(driver, f"{row} .visible"), text_of(driver, f"{row} .inflight"), text_of(driver, f"{row} .delayed")


def _spark_peak(driver, series: str) -> float:
    """The highest point of a sparkline, 0 at its baseline (the SVG's y axis points down)."""
    pts = driver.find_element("css selector", f'[data-series="{series}"] polyline').get_attribute("points").split()
    return max((28 - float(p.split(",")[1]) for p in pts), default=0.0)


def test_the_dashboard_follows_a_live_cluster_through_sends_and_a_kill_of_the_master(browser, tmp_path):
    with local_cluster(tmp_path / "cluster") as (cluster, master):
        plan = cluster.plan
        url = {n.name: n.url for n in plan}
        replica = next(n.name for n in plan if n.name != master)
        sqs = sqs_client(url[replica])     # forwarded to the master
        q = sqs.create_queue(QueueName="orders")["QueueUrl"]

        browser.get(url[replica] + "/ui")
        wait_until(browser, f"the master {master}", lambda d: text_of(d, "#master") == master)
        wait_until(browser, "every member", lambda d: all(text_of(d, f'tr[data-member="{n.name}"]') for n in plan))
        assert text_of(browser, f'tr[data-member="{master}"] .role') == "master"
        assert not browser.find_element("id", "groups-section").is_displayed(), "one group: no groups table"
        assert text_of(browser, f'tr[data-member="{replica}"] .role') == "replica"
        assert "me" in browser.find_element("css selector", f'tr[data-member="{replica}"]').get_attribute("class")
        wait_until(browser, "serving by forwarding", lambda d: text_of(d, "#serving") == f"serving, by forwarding to {master}")
        wait_until(browser, "the empty queue", lambda d: _counts(d, "orders") == ("0", "0", "0"))

        for i in range(3):
            sqs.send_message(QueueUrl=q, MessageBody=f"m{i}")
        sqs.send_message(QueueUrl=q, MessageBody="later", DelaySeconds=600)
        wait_until(browser, "3 visible and 1 delayed", lambda d: _counts(d, "orders") == ("3", "0", "1"))
        got = sqs.receive_message(QueueUrl=q, VisibilityTimeout=600)["Messages"]
        assert len(got) == 1
        wait_until(browser, "2 visible, 1 in flight", lambda d: _counts(d, "orders") == ("2", "1", "1"))
        wait_until(browser, "the replicated batches on the sparkline", lambda d: _spark_peak(d, "batches") > 0)
        wait_until(browser, "the view in the events", lambda d: f"master {master}" in text_of(d, '#events li[data-event="view"]'))
        screenshot(browser, "dashboard-cluster")

        cluster.procs[master].kill()         # SIGKILL
        cluster.procs[master].wait(5)
        survivors = [n.name for n in plan if n.name != master]
        new = wait_until(browser, "a new master", lambda d: text_of(d, "#master") in survivors and text_of(d, "#master"))
        wait_until(browser, f"{master}'s links down", lambda d: "down" in text_of(d, f'tr[data-member="{master}"]'))
        wait_until(browser, f"the view naming {new} in the events",
              lambda d: any(f"master {new}" in e.text for e in d.find_elements("css selector", '#events li[data-event="view"]')))
        wait_until(browser, "serving again", lambda d: text_of(d, "#serving").startswith("serving"))
        assert _counts(browser, "orders") == ("2", "1", "1"), "what the majority acknowledged survived"
        sqs.send_message(QueueUrl=q, MessageBody="after the failover")
        wait_until(browser, "the send after the failover", lambda d: _counts(d, "orders") == ("3", "1", "1"))
        screenshot(browser, "dashboard-after-failover")


def test_ten_thousand_queues_stay_a_page_of_fifty(browser):
    from elasticmq_py.server import Server

    ns = Namespace()
    with Server(port=0) as server:
        for i in range(10_000):
            server.execute(CreateQueue(ns, f"q-{i:05d}", {}, {}))
        for _ in range(7):
            server.execute(SendMessage(ns.key("q-04242"), "x"))
        browser.get(server.endpoint_url + "/ui")
        wait_until(browser, "the first page", lambda d: text_of(d, "#pager") == "1–50 of 10000")
        rows = browser.find_elements("css selector", "#queues tbody tr")
        assert len(rows) == 50 and rows[0].get_attribute("data-queue") == "q-00000"
        assert "10000 queues" in text_of(browser, "#queue-summary") and "7 visible" in text_of(browser, "#queue-summary")

        browser.find_element("id", "next").click()
        wait_until(browser, "the second page", lambda d: text_of(d, "#pager") == "51–100 of 10000")
        assert text_of(browser, "#queues tbody tr") .startswith("q-00050")

        browser.find_element("id", "filter").send_keys("q-0424")
        wait_until(browser, "the filtered page", lambda d: text_of(d, "#pager") == "1–10 of 10 matching “q-0424”")
        from selenium.webdriver.support.ui import Select

        Select(browser.find_element("id", "sort")).select_by_value("total")
        wait_until(browser, "the fullest queue first", lambda d: text_of(d, "#queues tbody tr").startswith("q-04242"))
        assert _counts(browser, "q-04242") == ("7", "0", "0")
        screenshot(browser, "dashboard-10000-queues")
