"""One SparkSession per test process (starting one costs ~10 s), on local[2]."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from sim.spark import session

    # Whole-stage code generation compiles Java for every query: a loss on the tests' tiny tables.
    s = session("local[2]", app="elasticmq-py-sim-tests", conf={"spark.sql.codegen.wholeStage": "false"})
    yield s
    s.stop()
