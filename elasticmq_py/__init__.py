"""elasticmq-py: an SQS-compatible message server (the product surface over storage/cluster).

The package's names load on first use (PEP 562): pytest imports ``elasticmq_py.pytest_plugin``
in every test run of an environment where the package is installed, and importing the server
with it would cost each such run about half a second, whether a test asks for ``sqs_endpoint``
or not.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from elasticmq_py.backend import Backend, LocalBackend
    from elasticmq_py.config import Config
    from elasticmq_py.server import Server

_HOMES = {"Backend": "elasticmq_py.backend", "LocalBackend": "elasticmq_py.backend",
          "Config": "elasticmq_py.config", "Server": "elasticmq_py.server"}

__all__ = ["Backend", "Config", "LocalBackend", "Server"]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'elasticmq_py' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
