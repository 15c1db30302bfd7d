"""Fixtures: one Toxiproxy server per test process (the real toxiproxy-server when on PATH, else
the builtin one; ELASTICMQ_PY_TOXIPROXY=builtin|real|auto chooses, see
elasticmq_py/toxiproxy/README.md), driven only through the toxiproxy-python client."""

from __future__ import annotations

import itertools
import os
from typing import Iterator

import pytest
from toxiproxy import Toxiproxy
from toxiproxy.api import APIConsumer

from elasticmq_py.toxiproxy.testing import RunningToxiproxy, start_toxiproxy
from tests.toxiproxy.upstreams import Upstream, echo

_names = itertools.count()


@pytest.fixture(scope="session")
def toxiproxy_server() -> Iterator[RunningToxiproxy]:
    with start_toxiproxy() as server:
        yield server


@pytest.fixture
def toxiproxy(toxiproxy_server: RunningToxiproxy) -> Iterator[Toxiproxy]:
    """A client pointed at the server; every proxy is destroyed after the test."""
    client = Toxiproxy()
    client.update_api_consumer(toxiproxy_server.host, toxiproxy_server.port)
    yield client
    client.update_api_consumer(toxiproxy_server.host, toxiproxy_server.port)
    client.reset()
    client.destroy_all()


@pytest.fixture(scope="session")
def echo_upstream() -> Iterator[Upstream]:
    up = Upstream(echo)
    yield up
    up.close()


@pytest.fixture
def name() -> str:
    return f"p{os.getpid()}_{next(_names)}"


@pytest.fixture
def echo_proxy(toxiproxy: Toxiproxy, echo_upstream: Upstream, name: str):
    return toxiproxy.create(upstream=echo_upstream.address, name=name, listen="127.0.0.1:0")


@pytest.fixture
def api() -> type[APIConsumer]:
    return APIConsumer
