"""elasticmq-py: an SQS-compatible message server (the product surface over storage/cluster)."""

from elasticmq_py.backend import Backend, LocalBackend
from elasticmq_py.config import Config
from elasticmq_py.server import Server

__all__ = ["Backend", "Config", "LocalBackend", "Server"]
