"""The suite's order: tests marked ``slow`` first.

``make test`` hands tests to its workers one at a time in this order. Started first, the long
tests (the chaos scenarios, the process clusters, the Spark runs) overlap one another and the
many short tests fill in around them; left where collection puts them, one could start near
the end and run alone while the other workers sit idle."""

from __future__ import annotations


def pytest_collection_modifyitems(items) -> None:
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)   # stable: otherwise as collected
