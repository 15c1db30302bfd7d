"""bench/report.py: the docs' benchmark tables are what the committed results render, and the
renderer fails loudly on a missing results file or field."""

from __future__ import annotations

import copy
import json
import re

import pytest

from bench import report, tables
from bench.report import BLOCKS, rewrite
from bench.resultfiles import MissingResult, Results

FAILOVER = {
    "benchmark": "failover",
    "machine": {"python": "3.11.7", "cpus": 2, "when": "2026-01-02T03:04:05Z"},
    "nodes": "elasticmq-py serve",
    "timing": {"heartbeat": 0.05, "election_min": 0.2, "election_max": 0.4, "vote_guard": 0.18, "lease": 0.15,
               "leader_fallback": 1.0},
    "kill_to_new_active": {"n": 4, "median_s": 0.3276, "p99_s": 0.5544, "max_s": 0.5544},
    "sigstop_to_old_inactive": {"n": 4, "median_s": 0.1167, "p99_s": 0.1473, "max_s": 0.1473},
    "sigstop_to_new_active": {"n": 4, "median_s": 0.3101, "p99_s": 0.6667, "max_s": 0.6667},
    "old_inactive_before_new_active": "4/4",
    "goals": {"kill_to_new_active_median_s": 0.5, "kill_to_new_active_p99_s": 1.5, "old_inactive_first_pct": 100.0},
    "goals_met": {"kill_to_new_active_median_s": True, "kill_to_new_active_p99_s": False,
                  "old_inactive_first_pct": True},
}
PAGE = "# Failover\n\nProse stays.\n\n<!-- bench:failover -->\nold table\n<!-- /bench:failover -->\n\nMore prose.\n"


def _names_on(text: str) -> list[str]:
    return re.findall(r"^<!-- bench:([a-z0-9-]+) -->$", text, re.M)


# -- the committed pages --------------------------------------------------------------------------

def test_every_page_is_what_the_committed_results_render():
    results = Results.load(report.RESULTS)
    for page in report.pages():
        text = page.read_text()
        new, changed = rewrite(text, results, page.name)
        assert not changed, f"{page.name}: stale blocks {changed}; run python -m bench.report"
        assert new == text


def test_the_performance_page_shows_every_block_but_the_headline_and_the_production_ones_once():
    names = _names_on(report.PERFORMANCE.read_text())
    assert sorted(names) == sorted(set(BLOCKS) - {"headline"} - report.PRODUCTION_BLOCKS)


def test_the_production_page_shows_the_sizing_blocks_once_and_is_rendered():
    assert report.PRODUCTION in report.pages()
    assert sorted(_names_on(report.PRODUCTION.read_text())) == sorted(report.PRODUCTION_BLOCKS)


def test_the_sizing_tables_scale_to_a_million_and_name_their_file():
    sizing = Results.load(report.RESULTS)
    memory = BLOCKS["sizing-memory"](sizing)
    disk = BLOCKS["sizing-disk"](sizing)
    assert memory.startswith("| body | messages measured | per message | per million (scaled) |")
    assert disk.startswith("| body | messages measured | journal as written, per million (scaled) |")
    for text in (memory, disk):
        assert [row.split(" | ")[0] for row in text.splitlines()[2:5]] == ["| 100 B", "| 1 KiB", "| 10 KiB"]
        assert "`bench/results/sizing.json`" in text and "`python -m bench --only sizing`" in text
    assert "a replica" in memory


def test_the_readme_headline_renders_from_the_committed_results():
    rows = BLOCKS["headline"](Results.load(report.RESULTS)).splitlines()
    assert rows[0].startswith("| measure (send 100 B, ") and len(rows) == 6
    assert all("`bench/results/" in row and "`python -m bench --only " in row for row in rows[2:])


def test_the_readme_carries_at_most_the_headline():
    names = _names_on(report.README.read_text())
    assert names in ([], ["headline"])
    assert (report.README in report.pages()) == (names == ["headline"])


# Outside the rendered blocks the page says no measured number: only names that contain digits.
NAMES_WITH_DIGITS = re.compile(r"`[^`]*`|127\.0\.0\.1|HTTP/1\.[01]|MD5|UTF-8|SHA-?256|\b3-node\b|"
                               r"^\s*\d\. |\b[Pp]arts? \d\w?\b")


def test_the_performance_page_has_no_number_outside_its_blocks():
    inside = fenced = False
    for n, line in enumerate(report.PERFORMANCE.read_text().splitlines(), 1):
        if line.startswith("```"):
            fenced = not fenced
        elif m := report.MARKER.match(line):
            inside = not m.group(1)
        elif not inside and not fenced:
            prose = NAMES_WITH_DIGITS.sub("", line)
            assert not re.search(r"\d", prose), f"docs/performance.md:{n}: a number outside a block: {line}"


# -- the renderer ---------------------------------------------------------------------------------

def test_a_block_is_rendered_from_its_results_and_the_rest_of_the_page_kept():
    new, changed = rewrite(PAGE, Results({"failover": FAILOVER}))
    assert changed == ["failover"]
    assert new.startswith("# Failover\n\nProse stays.\n\n<!-- bench:failover -->\n| measure | median |")
    assert new.endswith("<!-- /bench:failover -->\n\nMore prose.\n")
    assert "| kill -9 of the master -> a new master active | 0.33 s | 0.55 s | 0.55 s | 4 |" in new
    assert "p99 <= 1.5 s: not met" in new
    assert "`bench/results/failover.json`: run 2026-01-02T03:04:05Z on 2 CPUs" in new
    assert rewrite(new, Results({"failover": FAILOVER})) == (new, [])


def test_a_missing_results_file_is_an_error_naming_it():
    with pytest.raises(MissingResult, match=r"bench/results/failover\.json is missing \(run: python -m bench "
                                            r"--only failover\)"):
        rewrite(PAGE, Results({}))


def test_a_missing_field_is_an_error_naming_the_file_and_the_field():
    broken = copy.deepcopy(FAILOVER)
    del broken["kill_to_new_active"]["p99_s"]
    with pytest.raises(MissingResult, match=r"bench/results/failover\.json has no kill_to_new_active\.p99_s"):
        rewrite(PAGE, Results({"failover": broken}))


def test_a_null_field_is_missing_too_not_a_blank():
    broken = copy.deepcopy(FAILOVER)
    broken["sigstop_to_new_active"]["median_s"] = None
    with pytest.raises(MissingResult, match=r"has no sigstop_to_new_active\.median_s"):
        rewrite(PAGE, Results({"failover": broken}))


def test_list_items_are_named_by_their_index():
    node = Results({"sim": {"results": [{"master": "local[1]"}]}})["sim"]
    with pytest.raises(MissingResult, match=r"bench/results/sim\.json has no results\[0\]\.seeds"):
        node["results"][0]["seeds"]


@pytest.mark.parametrize("page, why", [
    ("<!-- bench:nonesuch -->\n<!-- /bench:nonesuch -->\n", "names no block"),
    ("<!-- bench:failover -->\nold\n", "never closed"),
    ("<!-- /bench:failover -->\n", "closes no block"),
    ("<!-- bench:failover -->\n<!-- bench:sim -->\n<!-- /bench:failover -->\n", "inside the block failover"),
])
def test_malformed_markers_are_refused(page, why):
    with pytest.raises(ValueError, match=why):
        rewrite(page, Results({"failover": FAILOVER}))


def test_a_smoke_run_is_never_rendered(tmp_path):
    (tmp_path / "failover-quick.json").write_text(json.dumps(FAILOVER))
    with pytest.raises(MissingResult, match="failover.json is missing"):
        Results.load(tmp_path)["failover"]
    (tmp_path / "failover.json").write_text(json.dumps(FAILOVER))
    assert Results.load(tmp_path)["failover"]["nodes"] == "elasticmq-py serve"


@pytest.fixture
def pages(tmp_path, monkeypatch):
    """A results folder, a performance page and a README of our own."""
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "failover.json").write_text(json.dumps(FAILOVER))
    (tmp_path / "performance.md").write_text(PAGE)
    (tmp_path / "README.md").write_text("# elasticmq-py\n")
    monkeypatch.setattr(report, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(report, "PERFORMANCE", tmp_path / "performance.md")
    monkeypatch.setattr(report, "PRODUCTION", tmp_path / "production.md")
    monkeypatch.setattr(report, "README", tmp_path / "README.md")
    return tmp_path


def test_check_names_the_stale_blocks_and_changes_nothing(pages, capsys):
    assert report.main(["--check"]) == 1
    assert capsys.readouterr().out == "stale: performance.md: failover\n"
    assert (pages / "performance.md").read_text() == PAGE
    assert report.main([]) == 0
    assert report.main(["--check"]) == 0


def test_a_production_page_is_rendered_once_it_exists(pages):
    assert report.pages() == [pages / "performance.md"]
    (pages / "production.md").write_text(PAGE.replace("# Failover", "# Running in production"))
    assert report.pages() == [pages / "performance.md", pages / "production.md"]
    assert report.main([]) == 0
    assert "| kill -9 of the master -> a new master active | 0.33 s |" in (pages / "production.md").read_text()


def test_a_readme_without_the_headline_marker_is_left_alone(pages):
    assert report.pages() == [pages / "performance.md"]
    assert report.main([]) == 0
    assert (pages / "README.md").read_text() == "# elasticmq-py\n"


def test_a_missing_file_fails_the_command_with_its_name(pages, capsys):
    (pages / "results" / "failover.json").unlink()
    assert report.main([]) == 2
    assert "bench/results/failover.json is missing" in capsys.readouterr().err
    assert (pages / "performance.md").read_text() == PAGE


def test_a_benchmark_run_renders_the_pages_after_writing_its_results(pages, monkeypatch):
    import bench.__main__ as bench_main

    monkeypatch.setattr(bench_main, "RESULTS", pages / "results")
    monkeypatch.setattr(bench_main, "SUITES", {"failover": lambda quick: FAILOVER})
    (pages / "results" / "failover.json").unlink()
    assert bench_main.main(["--only", "failover"]) == 0
    assert json.loads((pages / "results" / "failover.json").read_text()) == FAILOVER
    assert "| SIGSTOP of the master -> it is inactive | 0.12 s |" in (pages / "performance.md").read_text()


def test_numbers_are_grouped_and_tables_aligned():
    assert tables.num(1234567) == "1,234,567"
    assert tables.num(2.345, 1) == "2.3"
    assert tables.table(("a", "b"), [("x", "1")], right=(1,)) == "| a | b |\n|---|---:|\n| x | 1 |"
    assert tables.span([1.0, 2.0], str) == "1.0 to 2.0" and tables.span([3.0, 3.0], str) == "3.0"



def test_a_goal_the_run_could_not_measure_says_so():
    goals = Results({"endpoint": {"goals": [
        {"goal": "ours / sqslite", "measured": None, "target": ">= 1.5", "met": None, "note": "sqslite unavailable"},
        {"goal": "p50, ms", "measured": 0.14, "target": "<= 0.5", "met": True, "note": ""}]}})["endpoint"]["goals"]
    assert tables.goals_table(goals).splitlines()[2:] == [
        "| ours / sqslite | not measured | >= 1.5 | - | sqslite unavailable |",
        "| p50, ms | 0.14 | <= 0.5 | met |  |"]
