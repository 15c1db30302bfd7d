"""cluster/journal/disk.py: OsDisk's space reserved ahead of a file's data."""

from __future__ import annotations

import os

from cluster.journal.disk import OsDisk


def test_a_reserve_gives_the_file_its_size_at_once_and_appends_go_right_after_the_data(tmp_path):
    d = OsDisk(tmp_path)
    d.write_new("a.seg", b"header", reserve=4096)
    assert os.path.getsize(tmp_path / "a.seg") == 4096, "the whole size is there before any append"
    assert d.size("a.seg") == 6
    d.append("a.seg", b"-one")
    d.sync("a.seg")
    d.release("a.seg")
    d.append("a.seg", b"-two")          # reopened after a release: still right after the data
    assert d.size("a.seg") == 14
    assert d.read("a.seg") == b"header-one-two" + bytes(4096 - 14)
    d.truncate("a.seg", d.size("a.seg"))
    assert os.path.getsize(tmp_path / "a.seg") == 14 and d.read("a.seg") == b"header-one-two"
    d.append("a.seg", b"!")             # no reserve left: a plain append
    assert d.read("a.seg") == b"header-one-two!"
    d.close()


def test_a_reserve_that_cannot_be_had_only_costs_speed(tmp_path, monkeypatch):
    def refuse(fd, offset, length):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", refuse)
    d = OsDisk(tmp_path)
    d.write_new("a.seg", b"header", reserve=4096)
    d.append("a.seg", b"-one")
    assert d.size("a.seg") == 10 and d.read("a.seg") == b"header-one"
    d.close()


def test_no_reserve_is_a_plain_file(tmp_path):
    d = OsDisk(tmp_path)
    d.write_new("b.snap", b"data")
    d.append("b.snap", b"+")
    assert os.path.getsize(tmp_path / "b.snap") == 5 and d.size("b.snap") == 5
    d.close()
