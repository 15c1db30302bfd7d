"""A Jepsen-style checker for elasticmq-py cluster histories, used by the chaos tests and, scaled
out, by the Spark analysis.

    from cluster.checker import check_dir
    verdict = check_dir("run-42/")        # every *.jsonl under it: nodes, clients, nemesis
    print(verdict.summary("majority"))
    assert verdict.ok_for("majority"), verdict.summary("majority")

The record schema is in cluster/HISTORY.md; the rules the checker applies are there too.
"""

from cluster.checker.core import (DEFAULT_VISIBILITY_TIMEOUT, active_intervals, check, check_dir,
                                  digest_divergence, master_overlaps)
from cluster.checker.schema import (CHANGE_VISIBILITY, DELETE, FAILED, OK, RECEIVE, SEND, UNKNOWN, ClientOp,
                                    DigestRecord, History, NemesisEvent, NodeEvent, ReceivedMessage,
                                    load_dir, parse_lines, read_records, record_from_json,
                                    to_line, write_records)
from cluster.checker.verdict import (DUPLICATE_CATEGORIES, POLICIES, ActiveInterval, Divergence, Duplicate,
                                     LostSend, MasterOverlap, OrderViolation, QueueCounts, Recovered,
                                     Unexpected, Verdict)

__all__ = [
    "CHANGE_VISIBILITY", "DELETE", "FAILED", "OK", "RECEIVE", "SEND", "UNKNOWN",
    "ClientOp", "DigestRecord", "History", "NemesisEvent", "NodeEvent", "ReceivedMessage",
    "load_dir", "parse_lines", "read_records", "record_from_json", "to_line", "write_records",
    "DEFAULT_VISIBILITY_TIMEOUT", "active_intervals", "check", "check_dir", "digest_divergence",
    "master_overlaps",
    "DUPLICATE_CATEGORIES", "POLICIES", "ActiveInterval", "Divergence", "Duplicate", "LostSend",
    "MasterOverlap", "OrderViolation", "QueueCounts", "Recovered", "Unexpected", "Verdict",
]
