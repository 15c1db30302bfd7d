"""``elasticmq-py``: run a server, and look at or steer a running cluster.

    elasticmq-py serve [--config FILE] [--host H] [--port P] ...   (dashboard at http://H:P/ui)
    elasticmq-py local-cluster [--nodes 3] [--http-port 9324] [--policy P] [--dir DIR]
    elasticmq-py serve ... [--tls-cert FILE --tls-key FILE]       (HTTPS on the same port)
    elasticmq-py status [--endpoint URL] [--cafile FILE | --insecure] [--json]
    elasticmq-py step-down [--group N] [--to NAME] [--endpoint URL] [--secret S | --secret-file F | --config FILE]
    elasticmq-py members add NAME --raft HOST:PORT [--stream HOST:PORT] [--endpoint URL] [secret]
    elasticmq-py members remove NAME [--endpoint URL] [secret]

The operator commands talk HTTP to a node's endpoint (its SQS port), or HTTPS to an https://
endpoint, verified against the system's CAs, --cafile's, or (--insecure) not at all. The mutating ones need the
admin secret (the cluster secret unless [admin] sets one; sent in the X-Cluster-Secret header), given by
--secret, --secret-file, the node's --config file, or the ELASTICMQ_PY_CLUSTER_SECRET environment
variable; and the node accepts them only from the addresses in its ``admin-from`` (loopback by default).
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import json
import logging
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from typing import Any, Callable

from cluster.status import JournalInfo, NodeStatus, ReplicationStatus, TransferInfo

from elasticmq_py import journal_cli, localcluster, loglevel
from elasticmq_py.config import DEFAULT_HOST, DEFAULT_PORT, Config, ConfigError
from elasticmq_py.foreground import run_until_signalled
from elasticmq_py.tls import client_context
from elasticmq_py.toxiproxy import cli as toxiproxy_cli
from sim import cli as sim_cli   # `sim` and `analyze`: all their code lives in sim/

DEFAULT_ENDPOINT = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
SECRET_ENV = "ELASTICMQ_PY_CLUSTER_SECRET"
SECRET_HEADER = "X-Cluster-Secret"   # elasticmq_py.admin.SECRET_HEADER (not imported: keep the CLI light)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="elasticmq-py",
                                description="An SQS-compatible, replicated in-memory message server.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    s = sub.add_parser("serve", aliases=["run"], help="run the SQS endpoint (a single node, or a cluster member)",
                       description="Run the SQS endpoint (JSON and Query protocols) with, on the same port, "
                                   "the dashboard (/ui) and the read-only routes /health, /metrics and "
                                   "/cluster. With a [cluster] section in --config, run as a cluster member: "
                                   "the active master executes SQS calls and every other member forwards "
                                   "them to it (with forward = false in [cluster.replication] they answer "
                                   "a retryable 503 instead). /health is 200 wherever a client is served; "
                                   "/health?role=master only on the active master.")
    s.add_argument("--config", metavar="FILE",
                   help="TOML configuration file (host, port, account-id, region, limits, gc, "
                        "public-host, queues, [storage], [tls], [cluster]; elasticmq_py/config.py); "
                        "flags override it")
    s.add_argument("--host", help=f"address to listen on (default {DEFAULT_HOST})")
    s.add_argument("--port", type=int, help=f"port to listen on, 0 for any free one (default {DEFAULT_PORT})")
    s.add_argument("--account-id", help="account id in queue URLs and ARNs (default 000000000000)")
    s.add_argument("--region", help="region for requests without a SigV4 scope (default us-east-1)")
    s.add_argument("--limits", choices=["strict", "relaxed"], help="SQS limits profile (default strict)")
    s.add_argument("--gc", choices=["managed", "default"],
                   help="Python's cycle collector: managed keeps its pauses short however much is "
                        "stored (elasticmq_py/gcpolicy.py); default leaves it as Python runs it "
                        "(default managed)")
    s.add_argument("--data-dir", metavar="DIR",
                   help="keep queues and messages on disk in DIR (a journal with snapshots), so that they "
                        "survive a restart; the same as data-dir in [storage]. Default: in memory only")
    s.add_argument("--fsync", choices=["always", "interval", "never"],
                   help="with a data-dir: fsync every batch before answering (always, the default), every "
                        "fsync-interval-ms (interval), or leave it to the OS (never)")
    s.add_argument("--tls-cert", metavar="FILE",
                   help="serve HTTPS with this PEM certificate (chain); needs --tls-key. The same as "
                        "cert-file in [tls]. Default: plain HTTP")
    s.add_argument("--tls-key", metavar="FILE", help="the PEM private key of --tls-cert")
    loglevel.add_argument(s)
    s.add_argument("--print-port", action="store_true",
                   help="print the bound port on stdout once listening (for --port 0)")

    st = sub.add_parser("status", help="show a node's view of the cluster",
                        description="Show the cluster as one node sees it (GET /cluster): view, master, "
                                    "epoch, this node's role and activity, quorum, each peer's link state, "
                                    "and the replication stream (each replica's lag, the last state transfer).")
    _endpoint_arg(st)
    st.add_argument("--json", action="store_true", help="print the raw GET /cluster JSON")

    sd = sub.add_parser("step-down", help="make the master hand over to another member",
                        description="Ask the master to stop serving and hand Raft leadership to the most "
                                    "caught-up follower, or to --to NAME (operator-forced failover). There "
                                    "is no automatic failback. Must be sent to the master's endpoint.")
    _endpoint_arg(sd)
    _secret_args(sd)
    sd.add_argument("--to", metavar="NAME", help="the member to hand over to (it must be connected and caught up)")
    sd.add_argument("--group", type=int, metavar="N",
                    help="hand over only replication group N ([cluster] groups); send it to that group's "
                         "master's endpoint, and it answers once the group has moved")

    m = sub.add_parser("members", help="add or remove cluster members at runtime",
                       description="Change the Raft configuration of a running cluster. Send to the "
                                   "master's endpoint. A node being added must already be running with "
                                   "a configuration that lists the current members and itself.")
    msub = m.add_subparsers(dest="members_command", metavar="ACTION", required=True)
    ma = msub.add_parser("add", help="add a member", description="Add a member to the running cluster.")
    ma.add_argument("name", help="the new member's name")
    ma.add_argument("--raft", required=True, metavar="HOST:PORT", help="the new member's Raft address")
    ma.add_argument("--stream", metavar="HOST:PORT", help="the new member's mutation-stream address")
    _endpoint_arg(ma)
    _secret_args(ma)
    mr = msub.add_parser("remove", help="remove a member", description="Remove a member from the running cluster.")
    mr.add_argument("name", help="the member to remove")
    _endpoint_arg(mr)
    _secret_args(mr)

    localcluster.add_parser(sub)
    journal_cli.add_journal_commands(sub)
    toxiproxy_cli.add_parser(sub)
    sim_cli.add_parsers(sub)
    # More subcommands go here, each as sub.add_parser(NAME, ...) plus an entry in COMMANDS
    # (below) naming the function that runs it.
    return p


def _endpoint_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--endpoint", default=DEFAULT_ENDPOINT, metavar="URL",
                   help=f"the node's endpoint (default {DEFAULT_ENDPOINT})")
    p.add_argument("--timeout", type=float, default=15.0, help="seconds to wait for the node (default 15)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cafile", metavar="FILE",
                   help="for an https:// endpoint: trust the CA certificates in FILE (PEM) instead of the system's")
    g.add_argument("--insecure", action="store_true",
                   help="for an https:// endpoint: do not verify its certificate")


def _secret_args(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--secret", help=f"the cluster secret (or set {SECRET_ENV})")
    g.add_argument("--secret-file", metavar="FILE", help="read the cluster secret from FILE")
    g.add_argument("--config", metavar="FILE", help="take the cluster secret from a node's TOML configuration")


# -- serve --------------------------------------------------------------------------------------

def _serve(args: argparse.Namespace) -> int:
    from cluster.journaling import DataDirError
    from elasticmq_py.clustered import ClusterStartError
    from elasticmq_py.gcpolicy import GcPolicy
    from elasticmq_py.server import Server

    logging.basicConfig(level=args.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # `kill -USR1 <pid>` writes every thread's stack to stderr: what a stuck node is doing
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    logging.getLogger("pysyncobj").setLevel(logging.WARNING)
    try:
        base = Config.from_toml(args.config) if args.config else Config()
        config = base.with_overrides(host=args.host, port=args.port, account_id=args.account_id,
                                     region=args.region, limits=args.limits, gc=args.gc)
        config = _with_storage(config, args.data_dir, args.fsync)
        config = _with_tls(config, args.tls_cert, args.tls_key)
    except (ConfigError, ValueError) as e:
        print(f"elasticmq-py: {e}", file=sys.stderr)
        return 2
    server = Server(config=config)

    async def start() -> None:
        policy = None
        if config.gc == "managed":
            # a process of our own: its collector may be run for short pauses (gcpolicy.py).
            # Installed before the server starts, so that recovering a journal of a million
            # messages is not interrupted by full collections of the growing heap (each one
            # walks all of it: recovery took 20-30% longer with them).
            policy = GcPolicy().install()
        await server.start_async()
        if policy is not None:
            # What start-up built is long-lived: walk it once now and freeze it, rather than in
            # the first turn a second later, when a new master's lease may be in its way.
            policy.run_turn()

    def started() -> None:
        logging.getLogger("elasticmq_py").info("dashboard: %s/ui", server.endpoint_url)
        if args.print_port:
            print(server.port, flush=True)

    try:
        asyncio.run(run_until_signalled(start, server.stop_async, started))
    except KeyboardInterrupt:
        pass
    except ConfigError as e:
        print(f"elasticmq-py: {e}", file=sys.stderr)
        return 2
    except (ClusterStartError, DataDirError) as e:
        print(f"elasticmq-py: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"elasticmq-py: cannot listen on {config.host}:{config.port}: {e}", file=sys.stderr)
        return 1
    return 0


def _with_storage(config: Config, data_dir: str | None, fsync: str | None) -> Config:
    """--data-dir / --fsync over [storage] (a cluster member's too)."""
    from dataclasses import replace

    from cluster.config import Durability
    if data_dir is None and fsync is None:
        return config
    current = config.durability
    if data_dir is None and current is None:
        raise ConfigError("--fsync needs a data-dir (--data-dir, or data-dir in [storage])")
    if current is None:
        assert data_dir is not None
        durability = Durability(data_dir, fsync or "always")
    else:
        durability = replace(current, data_dir=data_dir or current.data_dir, fsync=fsync or current.fsync)
    config = replace(config, durability=durability)
    if config.cluster is not None:
        config = replace(config, cluster=replace(config.cluster, durability=durability))
    return config


def _with_tls(config: Config, cert: str | None, key: str | None) -> Config:
    """--tls-cert / --tls-key, as a pair, over [tls]."""
    from dataclasses import replace

    from elasticmq_py.config import Tls
    if cert is None and key is None:
        return config
    if cert is None or key is None:
        raise ConfigError("--tls-cert and --tls-key go together: give both or neither")
    return replace(config, tls=Tls(cert, key))


# -- operator commands ----------------------------------------------------------------------------

class CliError(Exception):
    pass


def _secret(args: argparse.Namespace) -> str:
    if getattr(args, "secret", None):
        return args.secret
    if getattr(args, "secret_file", None):
        try:
            return open(args.secret_file, encoding="utf-8").read().strip()
        except OSError as e:
            raise CliError(f"cannot read the secret file: {e}") from None
    if getattr(args, "config", None):
        try:
            cfg = Config.from_toml(args.config)
        except ConfigError as e:
            raise CliError(str(e)) from None
        if cfg.cluster is None:
            raise CliError(f"{args.config} has no [cluster] section, so no secret")
        return cfg.admin_secret or cfg.cluster.cluster.secret   # the admin routes take [admin]'s, if set
    if os.environ.get(SECRET_ENV):
        return os.environ[SECRET_ENV]
    raise CliError(f"the cluster secret is needed: give --secret, --secret-file or --config, or set {SECRET_ENV}")


def _call(args: argparse.Namespace, method: str, path: str, body: Any = None,
          secret: str | None = None) -> tuple[int, Any]:
    url = args.endpoint.rstrip("/") + path
    if "://" not in url:
        url = "http://" + url
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers[SECRET_HEADER] = secret
    data = json.dumps(body).encode() if body is not None else (b"" if method != "GET" else None)
    req = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        context = client_context(args.cafile, args.insecure)
    except ConfigError as e:
        raise CliError(str(e)) from None
    try:
        with urllib.request.urlopen(req, timeout=args.timeout, context=context) as r:
            raw, code = r.read(), r.status
    except urllib.error.HTTPError as e:
        raw, code = e.read(), e.code
    except (OSError, ValueError) as e:
        raise CliError(f"cannot reach {url}: {getattr(e, 'reason', e)}") from None
    try:
        return code, json.loads(raw or b"{}")
    except ValueError:
        raise CliError(f"{url} answered {code} with something that is not JSON: {raw[:200]!r}") from None


def _status(args: argparse.Namespace) -> int:
    code, st = _call(args, "GET", "/cluster")
    if code != 200:
        raise CliError(f"GET /cluster answered {code}: {st}")
    if args.json:
        print(json.dumps(st, indent=2))
    else:
        try:
            print(format_status(NodeStatus.from_dict(st)))
        except (TypeError, ValueError) as e:
            raise CliError(f"GET /cluster answered something that is not a node status: {e}") from None
    return 0


def _mutate(args: argparse.Namespace, method: str, path: str, body: Any, done: Callable[[Any], str]) -> int:
    code, reply = _call(args, method, path, body, secret=_secret(args))
    if code == 200:
        print(done(reply))
        return 0
    err = reply.get("error", reply) if isinstance(reply, dict) else reply
    hint = ""
    if code == 409 and isinstance(reply, dict) and reply.get("master"):
        hint = f" (the master is {reply['master']}: send this to its endpoint)"
    print(f"elasticmq-py: {method} {path} refused ({code}): {err}{hint}", file=sys.stderr)
    return 1


def _step_down(args: argparse.Namespace) -> int:
    body = {k: v for k, v in (("to", args.to), ("group", args.group)) if v is not None}
    return _mutate(args, "POST", "/cluster/step-down", body or None,
                   lambda r: f"stepped down: {r.get('to') or 'another member'} takes over as master"
                   + (f" of group {r['group']}" if "group" in r else ""))


def _members(args: argparse.Namespace) -> int:
    if args.members_command == "add":
        body = {"name": args.name, "raft": args.raft}
        if args.stream:
            body["stream"] = args.stream
        return _mutate(args, "POST", "/cluster/members", body, lambda r: f"added {r.get('added')}")
    return _mutate(args, "DELETE", f"/cluster/members/{args.name}", None, lambda r: f"removed {r.get('removed')}")


def format_status(st: NodeStatus, now: float | None = None) -> str:
    """A node's status as a table a person can read (``now``: the wall clock, for "s ago")."""
    def yn(v: Any) -> str:
        return "-" if v is None else ("yes" if v else "no")

    def secs(v: Any) -> str:
        return "-" if v is None else f"{v:.2f}s"

    view = st.view
    lines = []
    state = "ACTIVE (serving)" if st.active else f"inactive ({st.inactive_reason or 'not serving'})"
    lines.append(f"node      {st.node}   cluster {st.cluster or '-'}   role {st.role}   {state}")
    if view is not None:
        lines.append(f"view      {view.view_id}   master {view.master}   epoch {view.epoch}"
                     f"   members {', '.join(view.members)}")
    else:
        lines.append("view      none installed yet")
    extra = []
    if st.term is not None:
        extra.append(f"term {st.term}")
        extra.append(f"raft leader {st.leader or '-'}")
    extra.append(f"quorum {yn(st.quorum)}")
    if st.lease_remaining_s is not None:
        extra.append(f"lease {secs(st.lease_remaining_s)}")
    lines.append("          " + "   ".join(extra))
    if st.configured is not None:
        reach = st.reachable
        lines.append(f"configured {', '.join(st.configured)}"
                     + (f"   reachable {', '.join(reach)}" if reach is not None else ""))
    if st.raft is not None and st.raft.not_standing:
        lines.append(f"          not standing for election: {st.raft.not_standing}")
    if st.peers:
        rows = [("peer", "dial", "out", "in", "last rx", "last ack", "connects", "last error")]
        for name, p in sorted(st.peers.items()):
            out = p.out + (f" {p.out_for_s:.1f}s" if p.out_for_s is not None else "")
            rows.append((name, p.dial, out, yn(p.incoming), secs(p.last_rx_s_ago),
                         secs(p.last_ack_s_ago), str(p.connects), p.last_error or ""))
        lines.append("")
        lines += _table(rows)
    if st.groups_mismatch:
        lines.append(f"GROUPS MISMATCH: {st.groups_mismatch} (/health is 503: set the same [cluster] groups "
                     "on every member)")
    if st.groups:
        rows = [("group", "master", "epoch", "queues", "serving here", "lag")]
        rows += [(str(g.id), g.master or "-", str(g.epoch), str(g.queues), yn(g.serving),
                  "-" if g.lag is None else f"{g.lag} ms") for g in st.groups]
        lines.append("")
        lines += _table(rows)
    lines.append("")
    if st.replication.enabled:
        lines += _format_replication(st.replication, now)
    else:
        lines.append("replication disabled")
    if st.journal is not None:
        lines.append("")
        lines += _format_journal(st.journal, now)
    return "\n".join(lines)


def _format_journal(j: JournalInfo, now: float | None = None) -> list[str]:
    """The data-dir's journal: what survives a restart of this node (nothing is shown for a node
    in memory, nor by an older node that reports no journal)."""
    lines = ["journal        " + _fields(
        ("data-dir", j.data_dir), ("fsync", j.fsync), ("size", _bytes(j.bytes)), ("segments", j.segments),
        ("durable seq", j.durable_seq))]
    lines.append(" " * 15 + _fields(
        ("fsyncs", j.fsyncs), ("per s", j.fsyncs_per_s), ("last", _ms(j.fsync_ms_last)),
        ("avg", _ms(j.fsync_ms_avg)), ("entries per fsync", j.entries_per_fsync), ("queued", j.queue_depth)))
    if j.error:
        lines.append(" " * 15 + f"FAILED: {j.error} (the node stores nothing until restarted)")
    s = j.last_snapshot
    if s is None:
        lines.append("last snapshot  none")
    else:
        ago = (time.time() if now is None else now) - s.finished_at
        lines.append(f"last snapshot  {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(s.finished_at))} "
                     f"({ago:.0f}s ago): {_bytes(s.bytes)} in {s.duration_s:.2f}s, seq {s.at_seq}..{s.end_seq}")
    r = j.recovery
    if r is not None:
        lines.append(f"recovered      {r.messages} messages in {r.seconds:.2f}s (snapshot at seq "
                     f"{_v(r.snapshot_seq)}, {r.entries} entries replayed)"
                     + (f"; torn tail dropped: {r.truncated}" if r.truncated else "")
                     + ("; `journal truncate` had dropped entries" if r.entries_dropped else ""))
    return lines


def _table(rows: list[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def _v(v: Any) -> str:
    """A value, or '-' when the node did not report it."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _bytes(n: Any) -> str:
    if not isinstance(n, (int, float)):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "-"  # unreachable


def _ms(v: Any) -> str:
    return "-" if v is None else f"{v} ms"


def _fields(*pairs: tuple[str, Any]) -> str:
    """"label value" pairs, leaving out what the node did not report (an older node, or a role
    that has no such figure)."""
    return "   ".join(f"{k} {v if isinstance(v, str) else _v(v)}" for k, v in pairs if v is not None)


def _format_replication(r: ReplicationStatus, now: float | None = None) -> list[str]:
    """The replication part of a node's status: the stream as this node sees it."""
    log = r.log
    seqs = f"{log.first_seq}..{log.last_seq}" if log is not None and log.entries else None
    indent = " " * 12
    lines = ["replication enabled   " + _fields(
        ("policy", r.policy), ("forwarding", None if r.forward is None else ("on" if r.forward else "off")),
        ("role", r.role), ("serving", r.serving), ("epoch", r.epoch), ("master", r.master or "-"))]
    for more in (
        _fields(("amnesiac", "yes (restarted empty; counts in no sync quorum until caught up)"
                 if r.amnesiac else None),
                ("halted", r.halted), ("throttling", r.throttling),
                ("delay", None if r.delay_ms is None else _ms(r.delay_ms)),
                ("queue", None if r.replication_queue is None else f"{r.replication_queue} ops"),
                ("rejected frames", r.rejected_frames)),
        _fields(("log entries", log and log.entries),
                ("size", None if log is None or log.bytes is None else _bytes(log.bytes)),
                ("seq", seqs), ("last epoch", log and log.last_epoch), ("applied seq", r.applied_seq)),
    ):
        if more:
            lines.append(indent + more)
    if r.replicas:
        rows = [("replica", "connected", "acked seq", "lag batches", "lag ms", "needs transfer")]
        for name, p in sorted(r.replicas.items()):
            rows.append((name, _v(p.connected), _v(p.acked_seq), _v(p.lag_batches), _v(p.lag_ms),
                         _v(p.needs_transfer)))
        lines.append("")
        lines += _table(rows)
    elif r.role == "master":
        lines.append(indent + "replicas none")
    lines.append("")
    lines.append("last transfer  " + _format_transfer(r.last_transfer, now))
    return lines


def _format_transfer(t: TransferInfo | None, now: float | None = None) -> str:
    if t is None:
        return "none"
    what = f"sent to {t.peer}" if t.direction == "sent" else f"received from {t.peer}" if t.direction == "received" \
        else f"{t.direction} {t.peer}"
    when = "-"
    if t.at is not None:
        ago = (time.time() if now is None else now) - t.at
        when = f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t.at))} ({ago:.0f}s ago)"
    took = "-" if t.duration_s is None else f"{t.duration_s:.2f}s"
    return f"{what} at {when}: {_v(t.records)} records, {_bytes(t.bytes)} in {took}, up to seq {_v(t.at_seq)}"


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "serve": _serve,
    "run": _serve,
    "status": _status,
    "step-down": _step_down,
    "members": _members,
    "local-cluster": localcluster.run,
    "toxiproxy": toxiproxy_cli.run,
    **journal_cli.COMMANDS,
    **sim_cli.COMMANDS,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = COMMANDS.get(args.command)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return handler(args)
    except CliError as e:
        print(f"elasticmq-py: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`status | head`): stop quietly, as other CLI tools do. Python's
        # own recipe (the signal module's docs): point stdout at /dev/null, so that the flush at
        # exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
