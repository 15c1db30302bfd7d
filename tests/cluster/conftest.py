from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from elasticmq_py.testing.cluster import Cluster, check_single_master, check_views


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    """Builds clusters that are torn down, and whose histories are checked, after the test."""
    made: list[Cluster] = []

    def make(names: list[str], **kw) -> Cluster:
        c = Cluster(tmp_path / f"c{len(made)}", names, **kw)
        c.tmp.mkdir()
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
    for c in made:
        # Invariants that hold in every scenario; a test that fails here leaves its histories
        # and node logs in tmp_path.
        check_views(c.histories())
        check_single_master(c.histories(), c.kills)
