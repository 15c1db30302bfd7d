"""Partition chaos tests: real `elasticmq-py serve` clusters whose every directed link
(Raft and mutation stream) runs through a Toxiproxy server, process faults (kill -9, SIGSTOP,
restart with empty memory), recording boto3 clients, and the Jepsen-style checker.

* ``tests/chaos/scenarios.py``: the scenarios, each one fault story, and the short suite.
* ``tests/chaos/harness.py``: what a scenario is told with (``Run``: the cluster, the clients,
  the seeded choices, its own rules) and ``heal``.
* ``tests/chaos/runner.py``: ``run_scenario``, one bounded run and its verdict.
* ``tests/chaos/test_chaos.py``: each scenario once, on a short schedule (``make test``).
* ``python -m tests.chaos --runs N --seed S``: many seeded schedules (``make chaos``), with a
  summary table at the end.
"""
