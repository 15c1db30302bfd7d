"""The console in a real browser (headless Chromium, tests/endpoint/browser.py), against a live
3-member cluster of real processes (elasticmq-py's local-cluster launcher), on a replica's
dashboard: a person logs in with the cluster secret, opens a dead-letter queue's page, starts a
redrive and watches the DLQ empty and the source queue fill; then sends a test message, peeks,
purges and deletes the queue from its page. Every action reaches the master: its history shows
the SQS operations, the replica's shows the console's audit lines naming the master. Screenshots
go to tests/artifacts/."""

from __future__ import annotations

import json

import pytest

from cluster.history import read_history
from tests.endpoint.browser import screenshot, text_of, wait_until
from tests.endpoint.conftest import local_cluster, sqs_client

pytestmark = pytest.mark.slow

QUEUE_PAGE = "/ui/queue?region=us-east-1&account=000000000000&name="


def _accept(driver) -> None:
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 5).until(expected_conditions.alert_is_present()).accept()


def _logged_in(driver) -> bool:
    return text_of(driver, "#console-state") == "console: logged in"


def test_an_operator_redrives_a_dlq_and_acts_on_a_queue_through_a_replica(browser, tmp_path):
    from selenium.webdriver.common.by import By

    directory = tmp_path / "cluster"
    with local_cluster(directory, fsync=None) as (cluster, master):
        plan = cluster.plan
        url = {n.name: n.url for n in plan}
        replica = next(n.name for n in plan if n.name != master)
        sqs = sqs_client(url[replica])
        dlq = sqs.create_queue(QueueName="orders-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        q = sqs.create_queue(QueueName="orders", Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 1})})["QueueUrl"]
        for i in range(3):
            sqs.send_message(QueueUrl=q, MessageBody=f"order {i}")
        assert len(sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10, VisibilityTimeout=0)["Messages"]) == 3
        assert "Messages" not in sqs.receive_message(QueueUrl=q, MaxNumberOfMessages=10), "moved to the DLQ"

        browser.get(url[replica] + QUEUE_PAGE + "orders-dlq")
        wait_until(browser, "the DLQ's 3 messages", lambda d: text_of(d, "#visible") == "3")
        assert text_of(browser, "#dlq-for") == "the dead-letter queue of orders"
        assert browser.find_element(By.ID, "start-redrive").get_attribute("disabled"), "no action before login"
        browser.find_element(By.ID, "secret").send_keys("not the secret")
        browser.find_element(By.ID, "login-button").click()
        wait_until(browser, "the refusal", lambda d: text_of(d, "#console-state") == "wrong secret")
        browser.find_element(By.ID, "secret").send_keys((directory / "secret").read_text().strip())
        browser.find_element(By.ID, "login-button").click()
        wait_until(browser, "the console logged in", _logged_in)

        browser.find_element(By.ID, "start-redrive").click()
        wait_until(browser, "the redrive started on the master",
              lambda d: text_of(d, "#action-result") == f"started a redrive (executed by the master, {master})")
        wait_until(browser, "the DLQ emptied", lambda d: text_of(d, "#visible") == "0", timeout=30)
        wait_until(browser, "the task completed", lambda d: text_of(d, '#tasks tr[data-status="COMPLETED"] .moved') == "3")
        screenshot(browser, "console-dlq-redriven")

        browser.find_element(By.CSS_SELECTOR, "#dlq-for a.source").click()
        wait_until(browser, "orders refilled", lambda d: text_of(d, "#queue-name") == "orders" and text_of(d, "#visible") == "3")
        wait_until(browser, "the console still logged in", _logged_in)
        assert text_of(browser, "#redrive").startswith("dead letters go to orders-dlq after 1 receives")

        browser.find_element(By.ID, "send-body").send_keys("a test message")
        browser.find_element(By.ID, "add-attr").click()
        browser.find_element(By.CSS_SELECTOR, "#send-attrs .attr-name").send_keys("origin")
        browser.find_element(By.CSS_SELECTOR, "#send-attrs .attr-value").send_keys("console")
        browser.find_element(By.ID, "send").click()
        wait_until(browser, "the test message", lambda d: text_of(d, "#visible") == "4")
        assert text_of(browser, "#action-result").startswith("sent message ")

        browser.find_element(By.ID, "peek").click()
        wait_until(browser, "4 peeked messages", lambda d: text_of(d, "#action-result").startswith("peeked 4 messages"))
        bodies = {text_of(browser, f"#peeked tbody tr:nth-child({i}) .body") for i in range(1, 5)}
        assert bodies == {"order 0", "order 1", "order 2", "a test message"}
        row = next(r for r in browser.find_elements(By.CSS_SELECTOR, "#peeked tbody tr")
                   if r.find_element(By.CSS_SELECTOR, ".body").text == "a test message")
        assert row.find_element(By.CSS_SELECTOR, ".attrs").text == "origin = console (String)"
        assert "ApproximateReceiveCount = 1" in row.find_element(By.CSS_SELECTOR, ".sysattrs").text
        assert row.find_element(By.CSS_SELECTOR, ".receives").text == "1"
        assert text_of(browser, "#visible") == "4", "a peek hides nothing"
        screenshot(browser, "console-queue-peeked")

        browser.find_element(By.ID, "purge").click()
        _accept(browser)
        wait_until(browser, "the purge", lambda d: text_of(d, "#visible") == "0")
        browser.find_element(By.ID, "delete").click()
        _accept(browser)
        wait_until(browser, "the queue gone", lambda d: "holds no queue orders" in text_of(d, "#missing"))
        screenshot(browser, "console-queue-deleted")
        assert [u for u in sqs.list_queues().get("QueueUrls", []) if u.endswith("/orders")] == []

        audit = [e for e in read_history(str(directory / f"{replica}.history.jsonl")) if e["event"] == "console"]
        assert [(e["action"], e["outcome"]) for e in audit] == [
            ("login", "refused"), ("login", "ok"), ("StartMessageMoveTask", "ok"), ("SendMessage", "ok"),
            ("ReceiveMessage", "ok"), ("PurgeQueue", "ok"), ("DeleteQueue", "ok")]
        assert all(e["via"] == master for e in audit[2:]) and all(e["peer"] == "127.0.0.1" for e in audit)
        ops = [(e["action"], e["queue"]) for e in read_history(str(directory / f"{master}.history.jsonl"))
               if e["event"] == "op" and e["action"] in ("StartMessageMoveTask", "PurgeQueue", "DeleteQueue")]
        assert ops == [("StartMessageMoveTask", None), ("PurgeQueue", "orders"), ("DeleteQueue", "orders")]
