"""The demo's dbt step: a separate environment (dbt-core, dbt-duckdb, openlineage-dbt, pinned
in ``examples/dbt/requirements.txt``) created on first use, and the project in
``examples/dbt`` run with ``dbt-ol`` against DuckDB, reporting to Tidemark."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from .progress import DemoFailed, say
from .stack import shown

REPO = Path(__file__).resolve().parent.parent
PROJECT = REPO / "examples" / "dbt"
REQUIREMENTS = PROJECT / "requirements.txt"
PACKAGES = "dbt-core, dbt-duckdb and openlineage-dbt"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def ensure_env(venv: Path, *, python: str = "python3.11") -> Path:
    """Create ``venv`` with the pinned requirements unless it already has them; returns
    its ``bin`` directory. Raises ``DemoFailed`` naming what could not be installed."""
    stamp = venv / f".installed-{hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:12]}"
    bin_dir = venv / "bin"
    if stamp.exists() and (bin_dir / "dbt-ol").exists():
        say(f"dbt environment ready ({shown(venv)})")
        return bin_dir
    if venv.exists():
        shutil.rmtree(venv)
    say(f"creating the dbt environment in {shown(venv)} (first use: about a minute)")
    started = time.monotonic()
    _run([python, "-m", "venv", str(venv)], what=f"create a virtual environment with {python}")
    say(f"  installing {PACKAGES} from {shown(REQUIREMENTS)} with pip ...")
    proc = subprocess.Popen(
        [
            str(bin_dir / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--progress-bar",
            "off",
            "-r",
            str(REQUIREMENTS),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        tail = [*tail[-30:], line.rstrip()]
        match = re.match(
            r"(Collecting|Downloading|Installing collected packages)\s*:?\s*(.*)", line
        )
        if match and match[1] == "Collecting":
            say(f"    collecting {match[2].split()[0]}")
        elif match and match[1].startswith("Installing"):
            say("    installing the collected packages ...")
    if proc.wait() != 0:
        print("\n".join(tail), file=sys.stderr)
        raise DemoFailed(
            f"could not install {PACKAGES} ({shown(REQUIREMENTS)}) into "
            f"{shown(venv)}: pip exited {proc.returncode}; is the package "
            "registry reachable? (pip's last lines are above)"
        )
    stamp.touch()
    say(f"  dbt environment installed in {time.monotonic() - started:.0f} s")
    return bin_dir


def _run(args: list[str], *, what: str, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(args, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        raise DemoFailed(f"could not {what}:\n{result.stdout}{result.stderr}")
    return result


def load_warehouse(bin_dir: Path, workdir: Path, *, database_file: str) -> None:
    """The orders team's loader: two raw tables in the DuckDB file (with DuckDB's Python
    module from the dbt environment)."""
    script = (
        "import duckdb, sys\n"
        "c = duckdb.connect(sys.argv[1])\n"
        'c.execute("create or replace table raw_orders as select * from (values '
        "(1, timestamp '2026-11-28 10:00', 12.5), (2, timestamp '2026-11-28 11:00', 7.0), "
        "(3, timestamp '2026-11-29 09:30', 30.0)) t(order_id, ordered_at, amount)\")\n"
        'c.execute("create or replace table raw_refunds as select * from (values '
        "(2, 'damaged')) t(order_id, reason)\")\n"
        "c.close()\n"
    )
    _run([str(bin_dir / "python"), "-c", script, database_file], what="load DuckDB", cwd=workdir)


def copy_project(workdir: Path, *, database_file: str) -> None:
    """The committed project, copied into the demo's var directory (dbt writes its target
    and logs beside it); the profile names the run's DuckDB file."""
    if workdir.exists():
        shutil.rmtree(workdir)
    shutil.copytree(PROJECT, workdir, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb"))
    profile = (workdir / "profiles.yml").read_text()
    (workdir / "profiles.yml").write_text(
        profile.replace("path: warehouse.duckdb", f"path: {database_file}")
    )


def run_dbt_ol(bin_dir: Path, workdir: Path, *, url: str, api_key: str, job_namespace: str) -> int:
    """``dbt-ol run`` in ``workdir``, its events sent to Tidemark's OpenLineage endpoint
    with the team's key. Returns how many events dbt-ol says it emitted."""
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "DBT_PROFILES_DIR": str(workdir),
        "DO_NOT_TRACK": "1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "OPENLINEAGE_URL": url,
        "OPENLINEAGE_API_KEY": api_key,
        "OPENLINEAGE_NAMESPACE": job_namespace,
    }
    for name in ("OPENLINEAGE_CONFIG", "OPENLINEAGE_DISABLED"):
        env.pop(name, None)
    say(f"  $ dbt-ol run   (in {shown(workdir)}, OPENLINEAGE_URL={url})")
    result = subprocess.run(
        [str(bin_dir / "dbt-ol"), "run", "--project-dir", str(workdir)],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = result.stdout + result.stderr
    (workdir / "dbt-ol.log").write_text(out)
    if result.returncode != 0:
        raise DemoFailed(f"dbt-ol run failed ({result.returncode}):\n{out[-3000:]}")
    for line in out.splitlines():
        if re.search(r"Done\. PASS=|Emitted \d+ OpenLineage events", line):
            say(f"    {_ANSI.sub('', line).strip()}")
    match = re.search(r"Emitted (\d+) OpenLineage events", out)
    return int(match[1]) if match else 0
