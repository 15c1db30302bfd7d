"""The ``--log-level`` option every long-running command shares."""

from __future__ import annotations

import argparse

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_argument(p: argparse.ArgumentParser, what: str = "logging level") -> None:
    # choices, so that a misspelt level is a usage error rather than logging's traceback at start
    p.add_argument("--log-level", default="INFO", type=str.upper, choices=LEVELS, metavar="LEVEL",
                   help=f"{what}: {', '.join(LEVELS)}, in any case (default INFO)")
