"""A real server that verifies SigV4 ([auth] mode = "sigv4"), for the tests that rerun existing
client suites signed. The suites' own key (AKIDTEST/secret, see external_clients.py and
tests/conformance/conftest.py) acts as 000000000000, the account they expect in queue URLs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.endpoint.conftest import ServerProcess

SUITE_KEY = ("AKIDTEST", "secret", "000000000000")


def auth_toml(*keys: tuple[str, ...]) -> str:
    """[auth] with ``keys``: (access key id, secret, account[, session token]) each."""
    lines = ['[auth]', 'mode = "sigv4"']
    for key, secret, account, *token in keys:
        lines += ["[[auth.credentials]]", f'access-key-id = "{key}"', f'secret-access-key = "{secret}"',
                  f'account-id = "{account}"'] + ([f'session-token = "{token[0]}"'] if token else [])
    return "\n".join(lines) + "\n"


def sigv4_server(directory: Path, *keys: tuple[str, ...]) -> ServerProcess:
    path = directory / "auth.toml"
    path.write_text(auth_toml(*(keys or (SUITE_KEY,))))
    return ServerProcess("--config", str(path))


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory):
    """A sigv4 server with the suites' key, for a module that reruns a suite signed: such a
    module imports this as its ``server`` fixture."""
    s = sigv4_server(tmp_path_factory.mktemp("signed"))
    yield s
    err = s.stop()
    assert "Traceback" not in err, err
