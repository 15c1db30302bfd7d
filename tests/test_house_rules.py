"""The house rules that keep the project legible, checked on every tracked file.

- The README is for users and stays short; each page of docs/ is a reference page of its own.
- No hand-written module is over ``MODULE_LINES``: a file that grows past it holds more than one
  job and is split along its concerns.
- Files speak of the product, never of who changed what when: no ticket, session or bug numbers,
  no commit hashes, no "last week". That history lives in git, where it cannot go stale.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_LINES = 300
DOC_LINES = 600
MODULE_LINES = 800

# Generated or recorded data, not prose or code: results files, recorded histories, botocore's
# service model.
DATA_SUFFIXES = (".json", ".jsonl")

# Each pattern finds one way a file tells the project's own history. External citations stay:
# another project's issue is written with '#' ("aws-cli issue #7416"), ours never are.
HISTORY = {
    "a ticket or session number": r"\b(?:issue|ticket|session|sprint)s? \d+",
    "a numbered bug": r"\bbugs? \d+\b",
    "a commit named as when something happened": r"\b(?:at|in|since|until|before|after) (?=[0-9a-f]*\d)[0-9a-f]{7,40}\b",
    "a time of day a run was made": r"\b\d{1,2}:\d{2} UTC\b",
    "a relative date": r"\b(?:last|this|next) week\b|\byesterday\b",
    "a numbered sweep or session": r"\bsweep \d+\b|\b(?:first|second|third|previous|earlier) (?:session|sweep)\b",
    "who did it": r"\b(?:helper|agent|engineer)-\d+\b",
    "the simulator's former diary": r"sim/README\.md",
}
HISTORY_RE = re.compile("|".join(f"(?:{p})" for p in HISTORY.values()), re.IGNORECASE)


def tracked() -> list[Path]:
    out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    return [ROOT / p for p in out.decode().split("\0") if p]


def text_files() -> list[Path]:
    files = []
    for path in tracked():
        if path.suffix in DATA_SUFFIXES or not path.is_file():
            continue
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        files.append(path)
    return files


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_readme_is_short():
    assert lines(ROOT / "README.md") <= README_LINES


def test_each_doc_is_a_page_of_its_own():
    docs = sorted((ROOT / "docs").glob("*.md"))
    assert docs, "docs/ holds the reference pages"
    long = {p.name: lines(p) for p in docs if lines(p) > DOC_LINES}
    assert not long, f"pages over {DOC_LINES} lines: {long}"


def test_no_hand_written_module_is_over_the_limit():
    long = {str(p.relative_to(ROOT)): lines(p) for p in tracked() if p.suffix == ".py" and lines(p) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines (split them along their concerns): {long}"


def history_lines(paths: list[Path]) -> list[str]:
    hits = []
    for path in paths:
        if path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if HISTORY_RE.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:160]}")
    return hits


def test_no_tracked_file_tells_the_projects_history():
    hits = history_lines(text_files())
    assert not hits, "history belongs in git, not in files:\n" + "\n".join(hits)


LINK_RE = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
# a page of the repository named in prose or a comment: docs/simulator.md, cluster/HISTORY.md
PAGE_RE = re.compile(r"(?<![\w./-])((?:[\w-]+/)+[\w-]+\.md)\b")
# a module a page names: cluster/node_core.py
MODULE_RE = re.compile(r"(?<![\w./-])((?:storage|cluster|elasticmq_py|sim|tests|bench)/(?:[\w-]+/)*[\w-]+\.py)\b")


def test_every_page_and_module_named_exists():
    broken = []
    for path in text_files():
        if path == Path(__file__).resolve():   # its patterns name pages that are gone on purpose
            continue
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".md":
            for target in LINK_RE.findall(text):
                if "://" not in target and not target.startswith("mailto:") and not (path.parent / target).exists():
                    broken.append(f"{path.relative_to(ROOT)}: ({target})")
        named = PAGE_RE.findall(text) + (MODULE_RE.findall(text) if path.suffix == ".md" else [])
        for page in named:
            if not (ROOT / page).exists() and not (path.parent / page).exists():
                broken.append(f"{path.relative_to(ROOT)}: {page}")
    assert not broken, "pages named that do not exist:\n" + "\n".join(sorted(set(broken)))


# The numbers are filled in when the test runs, so that this file holds no line of history itself.
@pytest.mark.parametrize("line", [
    "Durability benchmark (issue {n}): what a data-dir costs",
    "Goals (issues {n} and 18, measured side by side)",
    "found by the simulator, sim/README.md bug {n}",
    "a slip found in session {n}",
    "the sweep found it at 129 (since 2d{n}b42)",
    "measured again at {n}:20 UTC",
    "as we saw last week",
    "before helper-{n}'s change",
])
def test_the_patterns_find_history(line):
    assert HISTORY_RE.search(line.format(n=16))


@pytest.mark.parametrize("line", [
    "AWS printed it so (aws-sdk-core-ruby #138; aws-cli issue #7416)",
    "Raft thesis 9.6: a pre-vote",
    "the `relink` rare path plays seed 103",
    "message ids are a random prefix plus a counter: 0f3a9c1d-...",
    "the first run of a seed writes its history",
    "python -m tests.chaos --seed 7 --runs 50 --only 12      # replay run 12 of that schedule",
])
def test_the_patterns_leave_the_product_alone(line):
    assert not HISTORY_RE.search(line)
