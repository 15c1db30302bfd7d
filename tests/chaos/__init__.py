"""Partition chaos tests (issue 6): real `elasticmq-py serve` clusters whose every directed link
(Raft and mutation stream) runs through a Toxiproxy server, process faults (kill -9, SIGSTOP,
restart with empty memory), recording boto3 clients, and the Jepsen-style checker.

* ``tests/chaos/scenarios.py``: the scenarios and ``run_scenario`` (one bounded run, one verdict).
* ``tests/chaos/test_chaos.py``: each scenario once, on a short schedule (``make test``).
* ``python -m tests.chaos --runs N --seed S``: many seeded schedules (``make chaos``), with a
  summary table at the end.
"""
