"""test_external_clients.py again against a server that verifies SigV4: botocore 1.29 (Query) and
the AWS CLI, signing with their configured credentials, work unchanged."""

from __future__ import annotations

import pytest

from tests.endpoint.auth_server import signed_server as server  # noqa: F401
from tests.endpoint.test_external_clients import *  # noqa: F401,F403

pytestmark = pytest.mark.slow
