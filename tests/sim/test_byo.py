"""Bring-your-own workloads and checks: a user's module in a temporary directory that the Spark
executors cannot import, named on the command line, shipped with cloudpickle (sim/shipped.py),
run for every seed (sim run --workload) and over every run's history (analyze --check); the
report names the command that replays each failing seed, or the files each failing run came from.
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import shutil
import textwrap
import uuid
from pathlib import Path

import pytest

from cluster.checker import parse_lines
from cluster.checker.schema import ClientOp
from elasticmq_py import cli as main_cli
from sim import generate, simulate
from sim.shipped import LoadError, ShippedCallable, load

DATA = Path(__file__).parent / "data"
DURATION = 8.0

USER_MODULE = '''
from storage.commands import CreateQueue, Namespace

QUEUE = "byo-orders.fifo"


class OrdersOnly:
    """Producers and consumers of one FIFO queue with two message groups."""

    def __init__(self, scenario):
        self.groups = 2

    def queues(self):
        return [CreateQueue(Namespace(), QUEUE, {"FifoQueue": "true", "VisibilityTimeout": "5"})]

    def draw(self, client):
        rng = client.rng
        if client.held and rng.random() < 0.4:
            return "delete", {"held": client.held.pop(0)}
        if rng.random() < 0.5:
            return "send", {"queue": QUEUE, "group": f"g{rng.randrange(self.groups)}"}
        return "receive", {"queue": QUEUE, "max": 10, "vt": None}


def workload(scenario):
    return OrdersOnly(scenario)


def only_our_queue(records, policy):
    other = sorted({r.queue for r in records if r.event == "client_op" and r.queue != QUEUE})
    return [f"operations on {other}"] if other else []


def a_million_views(records, policy):
    views = sum(1 for r in records if r.event == "view")
    return [f"only {views} views under {policy}"] if views < 1_000_000 else []


def broken(records, policy):
    raise RuntimeError("the user's bug")
'''


@pytest.fixture(scope="module")
def user_module(tmp_path_factory) -> tuple[Path, str]:
    """The user's file, under a name no process can import (a fresh one per test run)."""
    d = tmp_path_factory.mktemp("user")
    name = f"byo_{uuid.uuid4().hex[:12]}"
    path = d / f"{name}.py"
    path.write_text(textwrap.dedent(USER_MODULE))
    return path, name


def test_the_users_module_is_not_importable_on_the_executors(spark, user_module):
    path, name = user_module
    ShippedCallable.of(f"{path}:workload")      # loaded here, on the driver
    found = spark.sparkContext.parallelize([0, 1], 2).map(lambda _: importlib.util.find_spec(name) is None).collect()
    assert found == [True, True], "the executors cannot import it: it must travel by value"


def test_the_standard_workload_is_the_default_and_a_users_replaces_it(user_module):
    path, _ = user_module
    fn = ShippedCallable.of(f"{path}:workload").get()
    ours = simulate(generate(3, duration=DURATION))
    theirs = simulate(generate(3, duration=DURATION), workload=fn)
    queues = lambda r: {x.queue for x in parse_lines(r.history.splitlines()) if isinstance(x, ClientOp)}  # noqa: E731
    assert queues(ours) == {"sim-std", "sim-ordered.fifo"} and queues(theirs) == {"byo-orders.fifo"}
    assert theirs.ok, theirs.failures
    assert theirs.verdict.totals.acknowledged > 20, "the user's sends were made and checked"
    from sim.workload import standard

    assert simulate(generate(3, duration=DURATION), workload=standard).history == ours.history


def test_a_callable_is_named_by_module_or_file(user_module, monkeypatch):
    path, name = user_module
    monkeypatch.chdir(path.parent)             # module:function imports from here, as python -m would
    monkeypatch.syspath_prepend(str(path.parent))
    fn, modname = load(f"{name}:only_our_queue")
    assert modname == name and fn([], "majority") == []
    assert ShippedCallable.of(f"{path.name}:workload").spec == f"{path}:workload", "made absolute for replays"
    for spec, why in ((f"{name}", "expected module:function"), (f"{name}:nope", "has no callable 'nope'"),
                      ("no_such_module_here:f", "cannot import"), (f"{path}:1bad", "expected module:function")):
        with pytest.raises(LoadError, match=why):
            load(spec)


@pytest.mark.slow
def test_sim_run_with_a_users_workload_and_analyze_with_a_users_checks(spark, user_module, tmp_path, capsys):
    path, _ = user_module
    out = tmp_path / "run"
    rc = main_cli.main(["sim", "run", "--seeds", "3", "--duration", str(DURATION), "--workload", f"{path}:workload",
                        "--keep-histories", "--out", str(out), "--master", "local[2]", "--no-progress"])
    assert rc == 0, capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert summary["params"]["workload"] == f"{path}:workload"
    histories = {r["seed"]: r["history"] for r in spark.read.parquet(str(out / "runs")).collect()}
    ops = [x for h in histories.values() for x in parse_lines(h.splitlines()) if isinstance(x, ClientOp)]
    assert {x.queue for x in ops} == {"byo-orders.fifo"} and sum(x.op == "send" for x in ops) > 30

    # a check that passes, one that fails every run, one that raises: all run in the executors
    capsys.readouterr()
    assert main_cli.main(["analyze", str(out), "--check", f"{path}:only_our_queue", "--json", str(tmp_path / "a.json")]) == 0
    a = json.loads((tmp_path / "a.json").read_text())
    assert a["summary"]["runs"] == 3 and a["summary"]["failed"] == 0, a["failing"]

    report = tmp_path / "failing.html"
    assert main_cli.main(["analyze", str(out), "--check", f"{path}:a_million_views", "--report", str(report),
                          "--json", str(tmp_path / "b.json")]) == 0
    b = json.loads((tmp_path / "b.json").read_text())
    assert b["summary"]["failed"] == 3 and len(b["failing"]) == 3
    for f in b["failing"]:
        assert f["failures"][-1].startswith(f"check {path}:a_million_views: only ") and "under majority" in f["failures"][-1]
        assert f["replay"] == (f"elasticmq-py sim replay {f['seed']} --out seed-{f['seed']} --duration 8 "
                               f"--workload {shlex.quote(f'{path}:workload')}")
    page = report.read_text()
    assert all(f"elasticmq-py sim replay {s} --out seed-{s} --duration 8 --workload" in page for s in histories)

    # the command in the report replays the seed: the history its Spark task recorded
    seed = b["failing"][0]["seed"]
    argv = shlex.split(b["failing"][0]["replay"])[1:]
    argv[argv.index("--out") + 1] = str(tmp_path / "replayed")
    assert main_cli.main(argv) == 0
    replayed = sorted(line for p in (tmp_path / "replayed").glob("*.jsonl") for line in p.read_text().splitlines())
    assert replayed == sorted(histories[seed].splitlines())

    assert main_cli.main(["analyze", str(out), "--check", f"{path}:broken", "--json", str(tmp_path / "c.json")]) == 0
    c = json.loads((tmp_path / "c.json").read_text())
    assert c["summary"]["failed"] == 3
    assert c["failing"][0]["failures"][-1] == f"check {path}:broken: raised RuntimeError: the user's bug"


def test_a_failing_recorded_run_names_its_files(spark, user_module, tmp_path):
    path, _ = user_module
    runs = tmp_path / "chaos"
    runs.mkdir()
    shutil.copytree(DATA / "chaos-kill-master", runs / "kill-master")
    report = tmp_path / "r.html"
    assert main_cli.main(["analyze", str(runs), "--check", f"{path}:a_million_views", "--report", str(report),
                          "--json", str(tmp_path / "a.json")]) == 0
    a = json.loads((tmp_path / "a.json").read_text())
    [f] = a["failing"]
    assert f["run"] == "kill-master" and "replay" not in f
    assert f["files"] == sorted(f"kill-master/{p.name}" for p in (DATA / "chaos-kill-master").glob("*.jsonl"))
    page = report.read_text()
    assert "<code>kill-master/n1.history.jsonl</code>" in page and "<code>kill-master/nemesis.jsonl</code>" in page
