"""docs/production.md's configuration parses as the page shows it (elasticmq_py/config.py), and
says what the page says it does."""

from __future__ import annotations

import re
from pathlib import Path

from elasticmq_py.config import Config

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "production.md"


def example() -> str:
    """The page's first TOML block: the production configuration."""
    m = re.search(r"^```toml\n(.*?)^```$", PAGE.read_text(), re.S | re.M)
    assert m, "docs/production.md has no ```toml block"
    return m.group(1)


def _parsed(tmp_path: Path) -> Config:
    (tmp_path / "cluster.secret").write_text("a secret shared by the three members\n")
    path = tmp_path / "n1.toml"
    path.write_text(example())
    return Config.from_toml(path)


def test_the_example_carries_the_auth_section_the_page_describes():
    text = example()
    assert '[auth]\nmode = "sigv4"\n[[auth.credentials]]\n' in text
    for key in ("access-key-id", "secret-access-key", "account-id"):
        assert re.search(rf'^{key} = "', text, re.M)


def test_the_production_config_parses_as_the_page_shows_it(tmp_path):
    cfg = _parsed(tmp_path)
    assert cfg.durability is not None and cfg.durability.fsync == "always"
    assert cfg.durability.data_dir == "/var/lib/elasticmq-py/data"
    assert cfg.tls is not None and cfg.tls.cert_file == str(tmp_path / "n1.pem")
    node = cfg.cluster
    assert node is not None and node.self_name == "n1" and cfg.node_name == "n1"
    assert node.cluster.names == ("n1", "n2", "n3") and node.cluster.name == "orders"
    assert node.cluster.encrypt_links is True
    assert node.cluster.secret == "a secret shared by the three members"
    assert node.cluster.replication.policy == "majority"
    assert node.raft_state_dir == "/var/lib/elasticmq-py/raft"
    assert node.history_path == "/var/log/elasticmq-py/n1.history.jsonl"
    assert node.durability == cfg.durability
    assert cfg.admin_from == ("10.0.0.0/24", "127.0.0.1")
    assert cfg.account_id == "111111111111" and cfg.public_host == "sqs.internal:9324"
    assert cfg.auth.enabled and cfg.auth.mode == "sigv4"
    (key,) = cfg.auth.credentials
    assert (key.access_key_id, key.secret_access_key, key.account_id) == ("AKIA...", "...", "111111111111")
    (orders,) = cfg.queues      # its dead-letter queue is created with defaults at start
    assert orders.name == "orders" and orders.dead_letter_queue.name == "orders-dlq"
