"""A server for the Toxiproxy HTTP API (Shopify/toxiproxy), in asyncio: TCP proxies whose
links can be delayed, throttled, sliced, cut, held and reset, driven by any Toxiproxy client.
See README.md in this folder."""

from elasticmq_py.toxiproxy.api import API_VERSION, ToxiproxyApp
from elasticmq_py.toxiproxy.server import ThreadedToxiproxy, ToxiproxyServer

__all__ = ["API_VERSION", "ToxiproxyApp", "ToxiproxyServer", "ThreadedToxiproxy"]
