"""On Spark (local[2], one session per test process): a clean run of a few dozen seeds, the
analysis of its output and of a real run recorded from the chaos tests, the HTML report, and the
two commands."""

from __future__ import annotations

import base64
import io
import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from elasticmq_py import cli as main_cli
from sim.analysis import analyze
from sim.report import write_report
from sim.spark import run_seeds, spark_conf

DATA = Path(__file__).parent / "data"
CLEAN_SEEDS = 24
DURATION = 15.0


class _Images(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.srcs: list[str] = []
        self.tables = 0

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.srcs.append(dict(attrs)["src"])
        elif tag == "table":
            self.tables += 1


def check_report(path: Path) -> _Images:
    """The page parses, every image is an embedded PNG that decodes, nothing is fetched."""
    from PIL import Image

    text = path.read_text()
    p = _Images()
    p.feed(text)
    assert len(p.srcs) >= 6 and p.tables >= 3
    for src in p.srcs:
        assert src.startswith("data:image/png;base64,"), src[:40]
        raw = base64.b64decode(src.split(",", 1)[1])
        assert raw[:8] == b"\x89PNG\r\n\x1a\n"
        img = Image.open(io.BytesIO(raw))
        img.load()
        assert img.size[0] > 200 and img.size[1] > 100
    assert "http://" not in text and "https://" not in text, "an offline page links nothing"
    return p


def test_the_project_configures_spark_for_this_machine_and_lets_a_cluster_override_it(monkeypatch):
    local = spark_conf("local[2]")
    assert local["spark.driver.bindAddress"] == "127.0.0.1" and local["spark.ui.enabled"] == "false"
    remote = spark_conf("spark://10.0.0.5:7077", {"spark.sql.shuffle.partitions": "200"})
    assert "spark.driver.bindAddress" not in remote and remote["spark.sql.shuffle.partitions"] == "200"
    monkeypatch.setenv("ELASTICMQ_PY_SPARK_CONF", "spark.ui.enabled=true")
    assert spark_conf("local[2]")["spark.ui.enabled"] == "true"


@pytest.mark.slow
def test_clean_seeds_pass_on_local2_and_the_analysis_reports_them(spark, tmp_path):
    out = tmp_path / "clean"
    progress = io.StringIO()
    summary = run_seeds(spark, range(CLEAN_SEEDS), out, duration=DURATION, strict=True, stream=progress)
    assert summary["failing"] == [], summary.get("failing_detail")
    assert summary["seeds"] == CLEAN_SEEDS and summary["parallelism"] == 2
    assert f"{CLEAN_SEEDS}/{CLEAN_SEEDS} 100%" in progress.getvalue()
    saved = json.loads((out / "summary.json").read_text())
    assert saved["failing"] == [] and saved["params"]["duration"] == DURATION
    runs = spark.read.parquet(str(out / "runs"))
    assert runs.count() == CLEAN_SEEDS
    assert runs.where("history IS NOT NULL").count() == 0, "passing runs keep only their node lines"
    assert runs.agg({"acknowledged": "min"}).collect()[0][0] > 0

    a = analyze(spark, out)
    s = a["summary"]
    assert s["runs"] == CLEAN_SEEDS and s["failed"] == 0 and s["lost"] == 0 and s["divergence"] == 0
    assert s["ops_ok"] > 1000
    assert any(g["failover"] for g in a["gap_stats"]), "master changes happened and were measured"
    assert a["sync_stats"]["n"] > CLEAN_SEEDS, "every run syncs at least once"
    assert a["delay_stats"]["samples"] > 0 and len(a["delays"]) == a["delay_stats"]["samples"]
    assert {f["action"] for f in a["faults"]} >= {"kill", "restart", "heal"}
    assert a["judged"]["failing_runs"] == {"quiescent_divergence": 0, "unavailable": 0, "lost_deletes": 0,
                                           "in_window": 0, "provenance": 0, "waste": 0, "throttling": 0,
                                           "terms": 0}
    page = write_report(a, tmp_path / "report.html")
    check_report(page)
    assert "entry provenance (simulator)" in page.read_text() and "wasted work (simulator)" in page.read_text()
    assert "throttling (simulator)" in page.read_text() and "terms (simulator)" in page.read_text()


def test_a_recorded_real_run_from_the_chaos_tests_is_analysed(spark, tmp_path):
    runs = tmp_path / "chaos"
    runs.mkdir()
    shutil.copytree(DATA / "chaos-kill-master", runs / "kill-master")
    a = analyze(spark, runs)
    s = a["summary"]
    assert s["source"] == "history files" and s["runs"] == 1 and s["failed"] == 0
    assert s["acknowledged"] == 294 and s["lost"] == 0
    failovers = [g for g in a["gaps"] if g["failover"]]
    assert failovers and all(0 < g["gap_s"] < 15 for g in failovers), a["gaps"]
    assert a["sync_stats"]["n"] >= 2
    assert a["delay_stats"]["samples"] > 0, "the real master's replication lines"
    assert {e["event"] for e in a["events"]} >= {"client_op", "op", "view", "activated", "synced"}
    check_report(write_report(a, tmp_path / "chaos.html"))


def test_the_commands_run_a_planted_bug_analyze_it_and_replay_a_failing_seed(spark, tmp_path, capsys):
    out = tmp_path / "bug"
    # seeds 0-2 of these scenarios: early-ack is caught in the first, goes unnoticed in the others
    # (seeds 2-4 until the fork, deaf and race rare paths changed the draws of the seeds that play them)
    rc = main_cli.main(["sim", "run", "--seeds", "3", "--first-seed", "0", "--duration", str(DURATION),
                        "--bug", "early-ack", "--strict", "--out", str(out), "--master", "local[2]", "--no-progress"])
    printed = capsys.readouterr().out
    assert rc == 1 and "3 seeds in" in printed and "replay one with: elasticmq-py sim replay" in printed
    # the decision coverage table (sim/coverage.py): every point, with its counts over the sweep
    assert "decision coverage" in printed and "master.commit_count" in printed and "sync.most_advanced" in printed
    summary = json.loads((out / "summary.json").read_text())
    ran, differed = summary["decisions"]["lease.expiry"]
    assert ran > 0 and any(d for _, d in summary["decisions"].values()), summary["decisions"]
    assert 0 < len(summary["failing"]) < 3, summary
    runs = spark.read.parquet(str(out / "runs"))
    assert runs.where("ok AND history IS NULL").count() == 3 - len(summary["failing"])
    kept = {r["seed"]: r["history"] for r in runs.where("NOT ok").collect()}
    assert set(kept) == set(summary["failing"]) and all(h.count("\n") > 100 for h in kept.values()), \
        "a failing seed keeps its whole history"

    rc = main_cli.main(["analyze", str(out), "--json", str(tmp_path / "a.json")])
    assert rc == 0 and (out / "report.html").exists()
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["summary"]["runs"] == 3 and a["summary"]["failed"] == len(summary["failing"])
    shown = {r["point"]: (r["ran"], r["differed"]) for r in a["decisions"]}
    assert shown["lease.expiry"] == (ran, differed)
    assert "Decision coverage" in (out / "report.html").read_text()
    lines = [f["lines"] for f in a["failing"]]
    assert lines == sorted(lines) and a["failing"][0]["bugs"] == "early-ack", "shortest failing history first"
    check_report(out / "report.html")

    seed = summary["failing"][0]
    capsys.readouterr()
    rc = main_cli.main(["sim", "replay", str(seed), "--duration", str(DURATION), "--bug", "early-ack", "--strict",
                        "--out", str(tmp_path / "r")])
    printed = capsys.readouterr().out
    assert rc == 1 and "FAIL" in printed
    files = {p.name for p in (tmp_path / "r").iterdir()}
    assert {"n1.jsonl", "n2.jsonl", "n3.jsonl", "nemesis.jsonl", "scenario.json"} <= files
    from cluster.checker import check_dir

    verdict = check_dir(tmp_path / "r")    # the files hold the very history the command checked
    assert verdict.summary("majority") in printed and not verdict.ok_for("majority", strict=True)
    assert "".join(sorted(kept[seed].splitlines(keepends=True))) == "".join(
        sorted(line for p in sorted((tmp_path / "r").glob("*.jsonl")) for line in p.read_text().splitlines(True))), \
        "replaying a seed gives the history its Spark task recorded"


@pytest.mark.parametrize("argv", [["sim"], ["sim", "run", "--seeds", "0", "--out", "x"]])
def test_the_commands_refuse_nonsense(argv):
    assert main_cli.main(argv) == 2
