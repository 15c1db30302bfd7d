"""The cluster simulator and the cluster-history analysis (docs/simulator.md).

    from sim import generate, simulate
    result = simulate(generate(42, nodes=3, policy="majority"))
    print(result.ok, result.failures)
    print(result.verdict.summary("majority"))

``sim.world`` runs one seed (the real storage, replication and membership cores over a simulated
network and clock), ``sim.spark`` fans seeds out over Spark and writes Parquet, ``sim.analysis``
reads simulator output or JSON-lines history directories with Spark SQL, and ``sim.report``
renders the HTML report. ``sim.cli`` is the ``elasticmq-py sim`` / ``elasticmq-py analyze``
command line. sim imports cluster and storage, never elasticmq_py.
"""

from typing import Any

__all__ = ["Fault", "Scenario", "generate", "SimResult", "World", "simulate"]


def __getattr__(name: str) -> Any:
    # Lazy, so that `elasticmq-py` (which imports sim.cli to register its commands) does not load
    # the simulator for every command it runs.
    if name in ("Fault", "Scenario", "generate"):
        from sim import scenario

        return getattr(scenario, name)
    if name in ("SimResult", "World", "simulate"):
        from sim import world

        return getattr(world, name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
