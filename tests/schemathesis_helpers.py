"""schemathesis against a running server: the ``st`` command, every check, a fixed seed and a
bounded number of examples per operation, so both servers' runs fit in CI (about three
minutes on 2 cores). Any 5xx, response outside its documented schema, status, content
type or headers, or request wrongly accepted or refused fails the run.

The deterministic coverage phase (boundary and wrong-type values for every parameter and
field, several thousand requests) takes longer than CI allows: it runs when
``TIDEMARK_SCHEMATHESIS_COVERAGE=1``; the phases run by default are examples, fuzzing and
stateful.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ST = str(Path(sys.executable).with_name("st"))
CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = 20
MAX_EXAMPLES = 6


def run_schemathesis(
    *,
    schema_url: str,
    base_url: str,
    token: str,
    report_dir: Path,
    max_examples: int = MAX_EXAMPLES,
) -> subprocess.CompletedProcess:
    """Run ``st run`` with every check (``tests/schemathesis.toml``) against ``base_url``,
    authenticated with ``Authorization: Bearer <token>``; returns the finished process
    (``returncode`` 0 when every check passed, its output otherwise says which failed
    and how to reproduce it)."""
    phases = "examples,fuzzing,stateful"
    if os.environ.get("TIDEMARK_SCHEMATHESIS_COVERAGE") == "1":
        phases = "examples,coverage,fuzzing,stateful"
    argv = [
        *(ST, "--config-file", str(CONFIG), "run", schema_url, "--url", base_url),
        *("--seed", str(SEED), "--max-examples", str(max_examples), "--phases", phases),
        *("--header", f"Authorization: Bearer {token}"),
        *("--workers", "1", "--request-timeout", "10", "--no-shrink"),
        *("--report", "junit", "--report-dir", str(report_dir)),
        *("--output-truncate", "false"),
    ]
    report_dir.mkdir(parents=True, exist_ok=True)  # st keeps its cache in the working dir
    return subprocess.run(
        argv, cwd=report_dir, capture_output=True, text=True, timeout=900, check=False
    )
