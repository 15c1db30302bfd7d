"""One SparkSession per test process (starting one costs ~10 s), on local[2].

Only the two long Spark runs are marked ``slow`` (started first by make test): marking every
test that uses a session would start them together, a session on each worker, three Spark runs
on two cores. (``--dist loadgroup`` with ``xdist_group`` would keep them on one worker, but
with pytest 9.2 it groups nothing: pytest-xdist #1386.)"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from sim.spark import session

    # Whole-stage code generation compiles Java for every query: a loss on the tests' tiny tables.
    s = session("local[2]", app="elasticmq-py-sim-tests", conf={"spark.sql.codegen.wholeStage": "false"})
    yield s
    s.stop()
