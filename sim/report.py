"""The analysis as one self-contained HTML page: plots (PNG, embedded as data URIs) and tables.

Nothing is fetched when the page is opened (no scripts, no fonts, no style sheets from
elsewhere), so it can be mailed, archived with a CI run, or opened offline.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path
from typing import Any, Iterable

ANOMALIES = (("lost", "lost sends"), ("unexpected", "unexpected"), ("in_window", "in-window dup."),
             ("lost_deletes", "lost deletes"), ("order_violations", "FIFO order"),
             ("two_masters", "two masters"), ("divergence", "divergent digests"))


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _fig(w: float = 6.4, h: float = 3.4) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(w, h))
    ax.grid(True, alpha=0.3)
    return fig, ax


def _empty(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#777")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_outcomes(a: dict[str, Any]) -> str:
    fig, ax = _fig()
    groups = a["by_group"]
    if not groups:
        _empty(ax, "no runs")
        return _png(fig)
    labels = [f"{g['policy']}" + (f"\n+{g['bugs']}" if g["bugs"] else "") for g in groups]
    passed = [g["passed"] for g in groups]
    failed = [g["runs"] - g["passed"] for g in groups]
    x = range(len(groups))
    ax.bar(x, passed, width=0.5, color="#4c9a2a", label="passed")
    ax.bar(x, failed, width=0.5, bottom=passed, color="#c0392b", label="failed")
    ax.set_xlim(-0.75, len(groups) - 0.25)
    ax.set_xticks(list(x), labels, fontsize=8)
    ax.set_ylabel("runs")
    ax.set_title("Runs by ack policy (and planted bugs)")
    ax.legend()
    return _png(fig)


def plot_anomalies(a: dict[str, Any]) -> str:
    fig, ax = _fig()
    s = a["summary"]
    vals = [s.get(k) or 0 for k, _ in ANOMALIES]
    colors = ["#c0392b" if v else "#95a5a6" for v in vals]
    ax.barh([label for _, label in ANOMALIES], vals, color=colors)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v}", va="center", fontsize=8)
    ax.set_xlim(0, max(vals + [1]) * 1.15)
    ax.set_xlabel("count over all runs")
    ax.set_title("What the checker found")
    ax.invert_yaxis()
    return _png(fig)


def plot_gaps(a: dict[str, Any]) -> str:
    fig, ax = _fig()
    fo = [g["gap_s"] * 1000 for g in a["gaps"] if g["failover"]]
    bl = [g["gap_s"] * 1000 for g in a["gaps"] if not g["failover"]]
    if not fo and not bl:
        _empty(ax, "no master changes recorded")
        return _png(fig)
    import numpy as np

    top = max(fo + bl + [1.0])
    bins = np.logspace(0, np.log10(top * 1.1), 40)
    if fo:
        ax.hist(np.clip(fo, 1, None), bins=bins, alpha=0.75, color="#2c7fb8", label=f"failover, another node ({len(fo)})")
    if bl:
        ax.hist(np.clip(bl, 1, None), bins=bins, alpha=0.6, color="#f39c12", label=f"same node again ({len(bl)})")
    ax.set_xscale("log")
    ax.set_xlabel("ms without an active master (end of one interval to the next activation)")
    ax.set_ylabel("count")
    ax.set_title("Unavailability gaps")
    ax.legend(fontsize=8)
    return _png(fig)


def plot_delays(a: dict[str, Any]) -> str:
    fig, ax = _fig()
    d = [x for x in a["delays"] if x is not None]
    if not d:
        _empty(ax, "no replication lines in the histories")
        return _png(fig)
    import numpy as np

    xs = np.sort(np.asarray(d, dtype=float))
    ys = np.arange(1, len(xs) + 1) / len(xs)
    ax.plot(np.maximum(xs, 0.5), ys, color="#8e44ad")
    ax.set_xscale("log")
    ax.set_xlabel("replication delay, ms (age of the oldest unacknowledged batch; 0 plotted at 0.5)")
    ax.set_ylabel("fraction of samples <= x")
    ax.set_title(f"Replication delay of connected replicas ({len(xs)} samples)")
    return _png(fig)


def plot_transfers(a: dict[str, Any]) -> str:
    fig, ax = _fig()
    t = [x for x in a["transfers"] if x["bytes"] is not None and x["duration_s"] is not None]
    if not t:
        _empty(ax, "no state transfers")
        return _png(fig)
    ax.scatter([x["bytes"] / 1024 for x in t], [x["duration_s"] * 1000 for x in t], s=10, alpha=0.6, color="#16a085")
    ax.set_xlabel("snapshot size, KiB")
    ax.set_ylabel("duration, ms")
    ax.set_title(f"State transfers ({len(t)})")
    return _png(fig)


def plot_ops(a: dict[str, Any]) -> str:
    fig, ax = _fig(5.0, 2.6)
    s = a["summary"]
    vals = [s.get("ops_ok") or 0, s.get("ops_failed") or 0, s.get("ops_unknown") or 0]
    if not sum(vals):
        _empty(ax, "no client operations")
        return _png(fig)
    ax.barh(["ok", "failed", "unknown"], vals, color=["#4c9a2a", "#e67e22", "#7f8c8d"])
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v}", va="center", fontsize=8)
    ax.set_title("Client operation outcomes")
    ax.invert_yaxis()
    return _png(fig)


def _table(rows: Iterable[dict[str, Any]], cols: list[tuple[str, str]], limit: int = 200) -> str:
    rows = list(rows)
    head = "".join(f"<th>{html.escape(label)}</th>" for _, label in cols)
    body = []
    for r in rows[:limit]:
        cells = []
        for k, _ in cols:
            v = r.get(k)
            if isinstance(v, float):
                v = f"{v:.3f}"
            elif isinstance(v, list):
                v = "; ".join(str(x) for x in v)
            elif v is None:
                v = ""
            cls = ' class="bad"' if k in ("failures",) and v else ""
            cells.append(f"<td{cls}>{html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    more = f'<p class="note">... {len(rows) - limit} more rows</p>' if len(rows) > limit else ""
    if not rows:
        return '<p class="note">none</p>'
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>{more}"


def _failing_table(failing: list[dict[str, Any]]) -> str:
    """The failing runs, each with its way back: the command that replays a simulated seed with
    its run's options, or the history files a recorded run came from."""
    if not failing:
        return '<p class="note">none</p>'
    rows = []
    for f in failing:
        if f.get("replay"):
            back = f'<code class="cmd">{html.escape(f["replay"])}</code>'
        else:
            back = "<br>".join(f"<code>{html.escape(p)}</code>" for p in f.get("files") or ()) or "-"
        rows.append("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in (f["run"], f.get("bugs") or "")) +
                    f'<td class="bad">{html.escape("; ".join(f["failures"]))}</td>' +
                    "".join(f"<td>{html.escape(str(v))}</td>" for v in (f.get("lines"), f.get("ops"))) +
                    f"<td>{back}</td></tr>")
    head = "".join(f"<th>{h}</th>" for h in ("run", "planted bugs", "failures", "history lines", "ops",
                                              "replay it / where it came from"))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _judged(j: dict[str, Any]) -> str:
    """What the rules judged during the runs saw: points and stretches judged, runs failing each."""
    f = j.get("failing_runs") or {}
    rows = [{"rule": "digests at quiescent points", "judged": f"{j.get('quiescent_points', 0)} points",
             "failing": f.get("quiescent_divergence", 0)},
            {"rule": "availability of a healthy majority", "judged": f"{j.get('health_changes', 0)} changes of the healthy set",
             "failing": f.get("unavailable", 0)},
            {"rule": "lost deletes (majority, all)", "judged": "every delete", "failing": f.get("lost_deletes", 0)},
            {"rule": "in-window duplicates (majority, all)", "judged": "every delivery", "failing": f.get("in_window", 0)},
            {"rule": "entry provenance (simulator)", "judged": "every entry held and batch sent",
             "failing": f.get("provenance", 0)},
            {"rule": "wasted work (simulator)", "judged": "frames of an ended view; acks a journal report owed",
             "failing": f.get("waste", 0)},
            {"rule": "throttling (simulator)", "judged": "every master's tick and release",
             "failing": f.get("throttling", 0)},
            {"rule": "terms (simulator)", "judged": "every stand and rise of a Raft term", "failing": f.get("terms", 0)}]
    body = "".join("<tr>" + f"<td>{html.escape(r['rule'])}</td><td>{html.escape(str(r['judged']))}</td>"
                   + (f'<td class="bad">{r["failing"]}</td>' if r["failing"] else f"<td>{r['failing']}</td>") + "</tr>"
                   for r in rows)
    return ("<table><thead><tr><th>rule</th><th>judged</th><th>failing runs</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _decisions(rows: list[dict[str, Any]] | None) -> str:
    """Decision coverage (sim/coverage.py): flagged points (an alternative that differed too
    rarely, or a point never reached) in red."""
    if rows is None:
        return '<p class="note">not recorded (only simulator runs record it)</p>'
    body = "".join("<tr>" + f"<td><code>{html.escape(r['point'])}</code></td><td>{r['ran']}</td>"
                   + (f'<td class="bad">{r["differed"]} ({html.escape(r["flag"])})</td>' if r["flag"]
                      else f"<td>{r['differed']}</td>")
                   + f"<td>{html.escape(r['alternative'])}</td></tr>" for r in rows)
    return ("<table><thead><tr><th>decision point</th><th>ran</th><th>alternative differed</th>"
            f"<th>the decision, and the alternative counted</th></tr></thead><tbody>{body}</tbody></table>")


def _pct(p: Any, scale: float = 1.0, unit: str = "") -> str:
    if not p:
        return "-"
    return " / ".join(f"{x * scale:.1f}{unit}" for x in p)


CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2em auto; max-width: 1100px;
       color: #222; padding: 0 1em; }
h1 { margin-bottom: 0.2em; } h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 1em 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.6em 1em; min-width: 9em; }
.card .v { font-size: 1.6em; font-weight: 600; } .card .k { color: #666; font-size: 0.85em; }
.ok .v { color: #2e7d32; } .fail .v { color: #c0392b; }
.plots { display: grid; grid-template-columns: repeat(auto-fit, minmax(480px, 1fr)); gap: 1em; }
.plots img { max-width: 100%; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.5em; text-align: left; vertical-align: top; }
th { background: #f5f5f5; } td.bad { color: #c0392b; }
.note { color: #666; font-size: 0.9em; }
code.cmd { white-space: pre-wrap; user-select: all; }
"""


def render(a: dict[str, Any]) -> str:
    s = a["summary"]
    runs, failed = s.get("runs") or 0, s.get("failed") or 0
    sim = s.get("sim") or {}
    cards = [("runs", runs, ""), ("passed", s.get("passed") or 0, "ok"), ("failed", failed, "fail" if failed else "ok")]
    if sim.get("seeds_per_min"):
        cards.append(("seeds / min", sim["seeds_per_min"], ""))
    cards += [("client ops", s.get("ops") or 0, ""), ("history lines", s.get("lines") or 0, "")]
    if s.get("simulated_s"):
        cards.append(("simulated seconds", int(s["simulated_s"]), ""))
    card_html = "".join(f'<div class="card {c}"><div class="v">{html.escape(str(v))}</div>'
                        f'<div class="k">{html.escape(k)}</div></div>' for k, v, c in cards)
    gap_rows = [{"kind": "failover (another node)" if g["failover"] else "same node again", "n": g["n"],
                 "p": _pct(g["p"], 1000, " ms"), "max": f"{g['max_s'] * 1000:.1f} ms"} for g in a["gap_stats"]]
    ss, ds, ts = a["sync_stats"], a["delay_stats"], a["transfer_stats"]
    stats_rows = gap_rows + [
        {"kind": "master-change sync", "n": ss.get("n"), "p": _pct(ss.get("p"), 1000, " ms"),
         "max": "-" if ss.get("max_s") is None else f"{ss['max_s'] * 1000:.1f} ms"},
        {"kind": "replication delay", "n": ds.get("samples"), "p": _pct(ds.get("p"), 1, " ms") + " (p99.9 last)",
         "max": "-" if ds.get("max_ms") is None else f"{ds['max_ms']:.0f} ms"},
        {"kind": "state transfer duration", "n": ts.get("n"), "p": _pct(ts.get("duration_p"), 1000, " ms"),
         "max": "-" if ts.get("max_s") is None else f"{ts['max_s'] * 1000:.1f} ms"},
        {"kind": "state transfer size", "n": ts.get("n"), "p": _pct(ts.get("bytes_p"), 1 / 1024, " KiB"),
         "max": "-" if ts.get("max_bytes") is None else f"{ts['max_bytes'] / 1024:.1f} KiB"},
    ]
    params = ""
    if sim:
        p = sim.get("params", {})
        params = (f'<p class="note">Simulator: seeds {sim.get("first_seed")}..{(sim.get("first_seed") or 0) + sim.get("seeds", 0) - 1}, '
                  f'{p.get("nodes")} nodes, policy {p.get("policy")}, {p.get("duration")} s per seed, '
                  f'bugs {", ".join(p.get("bugs") or []) or "none"}, crash policy {p.get("crash_policy", "safe")}; '
                  f'{sim.get("wall_s")} s on {html.escape(str(sim.get("master")))}.</p>')
    count_cols = [("run", "run"), ("ok", "ok"), ("failures", "failures")] + \
        [(k, label) for k, label in ANOMALIES] + [("acknowledged", "acked sends"), ("ops", "ops"), ("lines", "lines")]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>elasticmq-py cluster history report</title>
<style>{CSS}</style></head><body>
<h1>Cluster history report</h1>
<p class="note">{html.escape(str(s.get("source")))} in <code>{html.escape(str(s.get("dir")))}</code>.
The checker's rules are in cluster/HISTORY.md; a run fails on lost or unexpected messages, FIFO order
violations, in-window duplicates and lost deletes (these under policies majority and all), two active masters,
divergent digests, divergence at a quiescent point and a healthy majority that answers no send
(cluster/checker/during.py, judged where the history carries the simulator's health and quiescent lines).</p>
{params}
<div class="cards">{card_html}</div>
<h2>Failing runs, shortest history first</h2>
{_failing_table(a["failing"])}
<p class="note">A simulated seed's command reruns it here, with the run's options, and writes its history to
the <code>--out</code> directory (readable by <code>analyze</code>).</p>
<h2>Judged during the runs</h2>
{_judged(a.get("judged") or {})}
<h2>Decision coverage</h2>
<p class="note">Per decision point of the cores (cluster/decisions.py), over all runs: how often it ran, and how
often a plausible one-line alternative would have decided differently. A point whose alternative differed
fewer than 10 times is flagged: a mutant making that change would likely pass these seeds.</p>
{_decisions(a.get("decisions"))}
<h2>Plots</h2>
<div class="plots">
<img alt="runs by policy" src="{plot_outcomes(a)}">
<img alt="anomalies" src="{plot_anomalies(a)}">
<img alt="unavailability gaps" src="{plot_gaps(a)}">
<img alt="replication delay" src="{plot_delays(a)}">
<img alt="state transfers" src="{plot_transfers(a)}">
<img alt="client operation outcomes" src="{plot_ops(a)}">
</div>
<h2>Timing (p50 / p90 / p99)</h2>
{_table(stats_rows, [("kind", "measure"), ("n", "count"), ("p", "percentiles"), ("max", "max")])}
<h2>By ack policy and planted bugs</h2>
{_table(a["by_group"], [("policy", "policy"), ("bugs", "bugs"), ("runs", "runs"), ("passed", "passed")] + [(k, label) for k, label in ANOMALIES])}
<h2>Checker counts per run</h2>
{_table(a["runs"], count_cols, 200)}
<h2>Faults injected</h2>
{_table(a["faults"], [("action", "nemesis action"), ("n", "count")])}
<h2>History events</h2>
{_table(a["events"], [("event", "event"), ("n", "lines")])}
</body></html>
"""


def write_report(a: dict[str, Any], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(render(a), encoding="utf-8")
    return p
