"""test_errors.py's corpus again, every request signed and verified ([auth] mode = "sigv4"): with
correct credentials, verification changes no answer. Its tests are collected here a second
time, against this module's server."""

from __future__ import annotations

from tests.conformance.test_errors import *  # noqa: F401,F403
from tests.endpoint.auth_server import signed_server as server  # noqa: F401
