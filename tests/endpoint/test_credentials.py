"""[auth] (elasticmq_py/auth/credentials.py): read from the config file, checked, and written back
into cluster members' files."""

from __future__ import annotations

import pytest

from cluster.config import Address, ClusterConfig, NodeConfig, NodeSpec
from elasticmq_py.auth.credentials import Auth, Credential
from elasticmq_py.config import Config, ConfigError, server_toml

SIGV4 = """
[auth]
mode = "sigv4"
[[auth.credentials]]
access-key-id = "AKIDA"
secret-access-key = "secret-a"
account-id = "111111111111"
[[auth.credentials]]
access-key-id = "ASIAB"
secret-access-key-file = "keys/b.secret"
account-id = "222222222222"
session-token = "token-b"
"""


def load(tmp_path, text: str) -> Config:
    p = tmp_path / "server.toml"
    p.write_text(text)
    return Config.from_toml(p)


def test_auth_is_off_unless_configured(tmp_path):
    assert load(tmp_path, "port = 1\n").auth == Auth()
    assert not Auth().enabled
    assert load(tmp_path, '[auth]\nmode = "off"\n').auth == Auth("off", ())


def test_sigv4_credentials_with_a_secret_file_relative_to_the_config(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "b.secret").write_text("secret-b\n")
    auth = load(tmp_path, SIGV4).auth
    assert auth.enabled
    assert auth.credentials == (Credential("AKIDA", "secret-a", "111111111111"),
                                Credential("ASIAB", "secret-b", "222222222222", "token-b"))
    assert "secret" not in repr(auth.credentials)   # secrets and tokens stay out of logs


@pytest.mark.parametrize("text, msg", [
    ('[auth]\nmode = "basic"', "mode 'basic' is not one of off, sigv4"),
    ('[auth]\nmode = "sigv4"', "needs at least one [[auth.credentials]]"),
    ('[auth]\nusers = 1', "unknown key(s) users"),
    ('[auth]\n[[auth.credentials]]\naccess-key-id = "A"\naccount-id = "111111111111"',
     "needs exactly one of secret-access-key and secret-access-key-file"),
    ('[auth]\n[[auth.credentials]]\naccess-key-id = "A"\nsecret-access-key = "s"\naccount-id = "42"',
     "account-id must be 12 digits"),
    ('[auth]\n[[auth.credentials]]\nsecret-access-key = "s"\naccount-id = "111111111111"', "access-key-id is required"),
    ('[auth]\n[[auth.credentials]]\naccess-key-id = "A"\nsecret-access-key = "s"\naccount-id = "111111111111"\n'
     '[[auth.credentials]]\naccess-key-id = "A"\nsecret-access-key = "t"\naccount-id = "222222222222"',
     "an access-key-id is listed twice"),
    ('[auth]\n[[auth.credentials]]\naccess-key-id = "A"\nsecret-access-key-file = "missing"\n'
     'account-id = "111111111111"', "secret-access-key-file:"),
    ('[auth]\n[[auth.credentials]]\naccess-key-id = "A"\nsecret = "s"\naccount-id = "111111111111"',
     "unknown key(s) secret"),
])
def test_auth_errors(tmp_path, text, msg):
    with pytest.raises(ConfigError, match=msg.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        load(tmp_path, text)


def test_a_members_file_carries_the_auth_section(tmp_path):
    specs = tuple(NodeSpec(n, Address("127.0.0.1", 20000 + i), Address("127.0.0.1", 21000 + i))
                  for i, n in enumerate(("n1", "n2", "n3")))
    node = NodeConfig("n1", ClusterConfig("c", "s3cret", specs))
    auth = Auth("sigv4", (Credential("AKIDA", "secret-a", "111111111111"),
                          Credential("ASIAB", "secret-b", "222222222222", "token-b")))
    assert load(tmp_path, server_toml(node, host="127.0.0.1", port=0, auth=auth)).auth == auth
    assert load(tmp_path, server_toml(node, host="127.0.0.1", port=0)).auth == Auth()
