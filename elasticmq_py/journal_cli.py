"""``elasticmq-py journal check DIR``, ``truncate DIR [--yes]``, ``backup DIR DEST`` and
``restore BACKUP DATA_DIR``.

DIR is a journal directory, or a node's data-dir holding one in ``journal/``. check and truncate
take the journal's lock, so they refuse while a node runs on it; backup is made for a running
node (cluster/journal/backup.py says why its copy is consistent). Exit status: 0 the journal is
sound (a torn tail, which opening the journal cuts, counts as sound), 1 damage found (and, for
truncate, left; for backup, in the source), 2 the command could not run (usage, no such
directory, the journal in use, a destination that is not empty).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, TextIO

from cluster.journal.backup import BackupFailed, backup, restore
from cluster.journal.disk import JournalIOError, JournalLocked
from cluster.journal.format import DROPPED_MARKER
from cluster.journal.recovery import JournalDamaged
from cluster.journal.shared_tools import SharedReport
from cluster.journal.tools import Report, check, truncate

EXIT_OK = 0
EXIT_DAMAGED = 1
EXIT_USAGE = 2


_DIR = ("dir", "DIR", "the journal directory, or the node's data-dir")
# name, help, description, positional arguments (dest, metavar, help)
_SUBCOMMANDS = (
    ("check", "report the journal's files, entries, snapshot and first problem",
     "Report the journal's files, histories, entries, snapshot position and the first problem (file and "
     "offset). Changes nothing.", (_DIR,)),
    ("truncate", "drop everything from the first damage on",
     "Drop everything from the first damage on: cut the damaged segment at the damage and remove the later "
     "segments (everything, when the damage leaves the snapshot without the entries it needs); a torn tail is "
     "cut too. The node fetches what it lacks from its peers when it starts. Without --yes, shows what it "
     "would drop and asks (on a terminal).", (_DIR,)),
    ("backup", "copy a running node's journal, consistently, and check the copy",
     "Copy the journal (snapshot and entries up to the last complete one) to DEST while the node runs, "
     "starting again if compaction removes a file during the copy, and check the copy. Raft's state is not "
     "copied: a backup is restored into new members (see `journal restore`).",
     (_DIR, ("dest", "DEST", "a new or empty directory for the copy"))),
    ("restore", "make a new data-dir from a backup",
     "Write the state a backup holds into DATA_DIR (new or empty) as one snapshot at epoch 0, so that a "
     "single node, or every member of a new cluster, starts from it.",
     (("backup", "BACKUP", "a directory written by `journal backup`"),
      ("data_dir", "DATA_DIR", "the node's new data-dir"))),
)


def add_journal_commands(sub: argparse._SubParsersAction) -> None:
    j = sub.add_parser("journal", help="check, repair, back up or restore a node's journal",
                       description="Look at a node's journal of mutation batches and snapshots, drop a "
                                   "damaged part of it (node stopped), copy it (node running), or make a new "
                                   "data-dir from a copy. DIR is the journal directory or the node's "
                                   "data-dir. Exit status 0: sound; 1: damage found; 2: could not run.")
    js = j.add_subparsers(dest="journal_command", metavar="SUBCOMMAND")
    for name, help_, description, positionals in _SUBCOMMANDS:
        p = js.add_parser(name, help=help_, description=description)
        for dest, metavar, what in positionals:
            p.add_argument(dest, metavar=metavar, help=what)
        if name == "truncate":
            p.add_argument("--yes", action="store_true", help="drop without asking")


def journal_dir(path: str) -> str:
    """``path`` itself, or its ``journal/`` when ``path`` is a data-dir."""
    inner = os.path.join(path, "journal")
    if os.path.isdir(inner) and not any(n.endswith((".seg", ".snap")) for n in _listdir(path)):
        return inner
    return path


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def run(args: argparse.Namespace, *, out: TextIO | None = None, err: TextIO | None = None,
        ask: Callable[[str], str] | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    command = getattr(args, "journal_command", None)
    if command not in ("check", "truncate", "backup", "restore"):
        print("elasticmq-py journal: give a subcommand: check DIR, truncate DIR [--yes], backup DIR DEST, "
              "or restore BACKUP DATA_DIR", file=err)
        return EXIT_USAGE
    try:
        if command == "backup":
            return _backup(journal_dir(args.dir), args.dest, out, err)
        if command == "restore":
            return _restore(args.backup, args.data_dir, out, err)
        path = journal_dir(args.dir)
        if command == "check":
            report = check(path)
            _print(report, out)
            return EXIT_DAMAGED if report.damaged else EXIT_OK
        return _truncate(path, args.yes, out, err, ask)
    except (JournalLocked, FileExistsError) as e:
        print(f"elasticmq-py journal: {e}", file=err)
        return EXIT_USAGE
    except (JournalIOError, OSError) as e:
        print(f"elasticmq-py journal: {e}", file=err)
        return EXIT_USAGE


def _truncate(path: str, yes: bool, out: TextIO, err: TextIO, ask: Callable[[str], str] | None) -> int:
    plan = truncate(path, apply=False)
    if plan.dropped is None:
        _print(plan, out)
        print("nothing to truncate", file=out)
        return EXIT_DAMAGED if plan.damaged else EXIT_OK
    if not yes:
        _print(plan, out)
        if ask is None and not sys.stdin.isatty():
            print("elasticmq-py journal: nothing changed; run again with --yes to drop it", file=err)
            return EXIT_USAGE
        answer = (ask or input)("drop it? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing changed", file=out)
            return EXIT_USAGE
    report = truncate(path)
    _print(report, out)
    return EXIT_DAMAGED if report.damaged else EXIT_OK


def _backup(src: str, dest: str, out: TextIO, err: TextIO) -> int:
    try:
        done = backup(src, dest)
    except BackupFailed as e:
        print(f"elasticmq-py journal: {e}", file=err)
        return EXIT_DAMAGED
    _print(done.report, out)
    again = "" if done.attempts == 1 else f" (taken again {done.attempts - 1}x: the node compacted during a copy)"
    print(f"backup of {src} written to {done.report.path}{again}; entries up to seq {done.report.last_seq}", file=out)
    return EXIT_DAMAGED if done.report.damaged else EXIT_OK


def _restore(src: str, data_dir: str, out: TextIO, err: TextIO) -> int:
    if os.path.isdir(data_dir) and os.listdir(data_dir):
        print(f"elasticmq-py journal: {data_dir} is not empty: restore into a new data-dir", file=err)
        return EXIT_USAGE
    try:
        report = restore(journal_dir(src), os.path.join(data_dir, "journal"))
    except JournalDamaged as e:
        print(f"elasticmq-py journal: the backup is damaged: {e}", file=err)
        return EXIT_DAMAGED
    _print(report, out)
    print(f"restored into {data_dir}: start the node with this data-dir", file=out)
    return EXIT_DAMAGED if report.damaged else EXIT_OK


def format_report(r: Report | SharedReport) -> list[str]:
    if isinstance(r, SharedReport):
        return _format_shared(r)
    lines = _files(r)
    lines.append(f"  histories: {', '.join(map(str, r.histories)) or 'none'} (current {r.history})")
    if r.snapshot is None:
        lines.append("  snapshot: none")
    else:
        s = r.snapshot
        lines.append(f"  snapshot: #{s.counter}, history {s.history}, at seq {s.at_seq} epoch {s.at_epoch}, "
                     f"needs entries up to {s.end_seq}")
    first = "-" if r.first_seq is None else r.first_seq
    if r.damaged:
        lines.append(f"  entries: {r.entries} readable before the problem (seq {first}..{r.last_seq})")
    else:
        lines.append(f"  entries: {r.entries} to replay; on disk seq {first}..{r.last_seq}")
    return lines + _outcome(r)


def _format_shared(r: SharedReport) -> list[str]:
    lines = _files(r)
    lines[0] += f" (shared by {len(r.groups)} groups)"
    for g in r.groups:
        s = g.snapshot
        snap = "no snapshot" if s is None else (f"snapshot #{s.counter} at seq {s.at_seq} epoch {s.at_epoch}, "
                                                 f"needs entries up to {s.end_seq}")
        first = "-" if g.first_seq is None else g.first_seq
        bad = "" if g.problem is None else "; damaged"
        lines.append(f"  group {g.group}: history {g.history}, {snap}; entries: {g.entries} to replay; "
                     f"on disk seq {first}..{g.last_seq}{bad}")
    return lines + _outcome(r)


def _files(r: Report | SharedReport) -> list[str]:
    lines = [f"journal {r.path}", f"  files: {len(r.files)} ({_bytes(r.bytes)})"]
    for f in r.files:
        extra = "" if f.history is None else f", history {f.history}" + ("" if f.seq is None else f", seq {f.seq}")
        lines.append(f"    {f.name}  {f.kind}, {_bytes(f.size)}{extra}")
    return lines


def _outcome(r: Report | SharedReport) -> list[str]:
    """The problem, what truncate dropped, and the marker it left."""
    lines = []
    if r.problem is None:
        lines.append("  problem: none")
    else:
        p = r.problem
        lines.append(f"  problem ({p.kind}): {p.file} at offset {p.offset}: {p.why}")
    d = r.dropped
    if d is not None:
        verb = "dropped" if d.applied else "would drop"
        seqs = ""
        if d.from_seq is not None:
            seqs = f" (entries from seq {d.from_seq}" + ("" if d.to_seq is None else f" to {d.to_seq}") + ")"
        lines.append(f"  {verb}: {d.what}{seqs}, {_bytes(d.bytes)}")
        if d.everything:
            lines.append("  the journal is empty now: the node fetches everything from its peers" if d.applied
                         else "  the journal would be emptied: the node would fetch everything from its peers")
    if r.entries_dropped:
        lines.append(f"  {DROPPED_MARKER}: truncate dropped entries the node may have acknowledged; a cluster "
                     f"member starts amnesiac (in no master-change majority) until a serving master has brought "
                     f"it up to date; a single node has no peers to fetch them from")
    return lines


def _print(r: Report | SharedReport, out: TextIO) -> None:
    print("\n".join(format_report(r)), file=out)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024   # type: ignore[assignment]
    return f"{n} B"


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {"journal": run}


def main(argv: list[str] | None = None) -> int:
    """The journal commands alone, as ``elasticmq-py`` would parse them."""
    parser = argparse.ArgumentParser(prog="elasticmq-py")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_journal_commands(sub)
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:
        return EXIT_USAGE if e.code else EXIT_OK
    if args.command != "journal":
        parser.print_help()
        return EXIT_USAGE
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
