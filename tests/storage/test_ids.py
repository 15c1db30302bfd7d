"""The id source: UUID-shaped message ids and receipt nonces, deterministic per seed."""

from __future__ import annotations

import re
import uuid

from storage.ids import IdSource

UUID_V4 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def test_ids_are_uuid_shaped_distinct_and_deterministic():
    a, b = IdSource(42), IdSource(42)
    ids = [a.uuid() for _ in range(1000)]
    assert ids == [b.uuid() for _ in range(1000)]
    assert len(set(ids)) == 1000
    for i in ids:
        assert UUID_V4.fullmatch(i), i
        assert str(uuid.UUID(i)) == i


def test_counter_digits_are_zero_padded_and_the_prefix_renews_at_the_end_of_the_space():
    ids = IdSource(1)
    ids._counter = 0
    first = ids.uuid()
    assert first.endswith("-000000000000")
    prefix = first[:-12]
    ids._counter = (1 << 48) - 1
    assert ids.uuid() == prefix + "ffffffffffff"
    renewed = ids.uuid()
    assert UUID_V4.fullmatch(renewed)
    assert not renewed.startswith(prefix)


def test_nonces_are_16_hex_digits_and_keep_leading_zeros():
    ids = IdSource(3)
    nonces = [ids.nonce() for _ in range(5000)]
    assert all(re.fullmatch(r"[0-9a-f]{16}", n) for n in nonces)
    assert any(n.startswith("0") for n in nonces)  # 1 in 16 do: padding is kept
    again = IdSource(3)
    assert nonces == [again.nonce() for _ in range(5000)]
