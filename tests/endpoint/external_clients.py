"""Real third-party SQS clients, installed once per machine into directories beside the venv.

They cannot share the test venv: the older botocore speaks the Query protocol and would replace
the current one, and the AWS CLI pins its own botocore. Each is ``pip install --target``-ed into
``.venv/ext-clients/<name>`` (the venv is per machine and ignored by git) and run in a
subprocess with that directory on PYTHONPATH. A lock keeps pytest-xdist workers from installing
the same one twice.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[2]
BASE = Path(sys.prefix) / "ext-clients"

# The last botocore whose SQS client spoke the Query protocol to SQS.
OLD_BOTOCORE = "botocore==1.29.165"
AWSCLI = "awscli>=1.32"


def ensure(name: str, *requirements: str) -> Path:
    target = BASE / name
    done = target / ".installed"
    BASE.mkdir(parents=True, exist_ok=True)
    with open(BASE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                            "--target", str(target), *requirements], check=True)
            done.write_text("\n".join(requirements))
    return target


def run_with(target: Path, args: list[str], env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    e.update(PYTHONPATH=str(target), PYTHONNOUSERSITE="1", AWS_ACCESS_KEY_ID="AKIDTEST",
             AWS_SECRET_ACCESS_KEY="secret", AWS_EC2_METADATA_DISABLED="true")
    e.update(env or {})
    return subprocess.run(args, env=e, capture_output=True, text=True, timeout=timeout, cwd=target)


def run_old_botocore_script(target: Path, endpoint: str, region: str, *ca_file: str) -> dict:
    """old_botocore_script.py under botocore 1.29 against ``endpoint``: what it printed."""
    script = Path(__file__).parent / "old_botocore_script.py"
    r = run_with(target, [sys.executable, str(script), endpoint, region, *ca_file])
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)
