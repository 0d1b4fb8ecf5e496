"""``python -m demo [--demo]`` (``make demo``): run the scripted scenario and print what was
expected against what was observed. Exit status 0 only when every expectation held."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import sys
import time
import traceback
from pathlib import Path

from .progress import DemoFailed, fatal, say, step
from .receivers import HeartbeatReceiver, PagerDutyReceiver, WebhookReceiver
from .report import Report
from .stack import SERVER_ENV, S3Server, Stack, fresh_dir, shown, storage_sources

REPO = Path(__file__).resolve().parent.parent


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make demo",
        description="Tidemark's scripted demo, on the embedded default (no servers).",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="allow the demo's teams, keys and datasets in the PostgreSQL databases named by "
        "DATABASE_URL and WATCHDOG_DATABASE_URL (and Redis in CELERY_BROKER_URL)",
    )
    parser.add_argument(
        "--var-dir",
        default=os.environ.get("TIDEMARK_DEMO_VAR_DIR", str(REPO / "var" / "demo")),
        help="the demo's own files, emptied at each run (default var/demo)",
    )
    parser.add_argument(
        "--dbt-venv",
        default=os.environ.get("TIDEMARK_DEMO_DBT_VENV", str(REPO / "var" / "demo-dbt-venv")),
        help="the dbt environment, created on first use (default var/demo-dbt-venv)",
    )
    return parser.parse_args(argv)


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    servers = [name for name in SERVER_ENV if os.environ.get(name)]
    if servers and not args.demo:
        fatal(
            f"{', '.join(servers)} set: the demo would write its teams, keys and datasets "
            "into a configured database. Unset them to run it embedded, or pass --demo "
            "(make demo DEMO_ARGS=--demo) to use them on purpose."
        )
        return 2
    if servers and set(servers) != set(SERVER_ENV):
        missing = ", ".join(sorted(set(SERVER_ENV) - set(servers)))
        fatal(f"with a configured database the demo needs all three settings; missing: {missing}")
        return 2
    embedded = not servers
    signal.signal(signal.SIGTERM, _on_sigterm)
    started = time.monotonic()
    report = Report()
    var_dir = Path(args.var_dir).resolve()
    fresh_dir(var_dir)
    tag = "" if embedded else "-" + secrets.token_hex(2)

    from . import dbt
    from .scenario import Scenario, World

    world = World(tag=tag)
    hooks, pagerduty, heartbeat = WebhookReceiver(), PagerDutyReceiver(), HeartbeatReceiver()
    receivers = (hooks, pagerduty, heartbeat)
    s3 = S3Server(var_dir / "moto.log")
    stack: Stack | None = None
    print(
        "Tidemark demo: "
        + (
            f"embedded (SQLite files and a filesystem broker under {shown(var_dir)})"
            if embedded
            else "PostgreSQL and "
            + os.environ["CELERY_BROKER_URL"].split("://")[0]
            + f" (--demo; this run's names end in {tag})"
        ),
        flush=True,
    )
    try:
        step("Receivers and the object store")
        for receiver in receivers:
            receiver.start()
            say(f"{receiver.name} on {receiver.url}")
        s3.start()
        settings = {
            "TIDEMARK_STORAGE_SOURCES": storage_sources(world.source, world.bucket, s3),
            "WATCHDOG_STORAGE_SOURCES": storage_sources(world.source, world.bucket, s3),
            # Documented settings only: a poll-only group is swept from every 10 s, backing
            # off to 30 s, and a group that also publishes events gets a 30 s safety net
            # (Celery beat still runs the poll task once a minute).
            "TIDEMARK_POLL_MIN_INTERVAL": "10",
            "TIDEMARK_POLL_MAX_INTERVAL": "30",
            "TIDEMARK_POLL_SAFETY_NET": "30",
            "WATCHDOG_PAGERDUTY_URL": pagerduty.enqueue_url,
            "WATCHDOG_HEARTBEAT_URL": heartbeat.ping_url,
            "WATCHDOG_HEARTBEAT_SECONDS": "15",
            # The receivers listen on loopback over plain HTTP.
            "TIDEMARK_OUTBOUND_ALLOW_NETWORKS": "127.0.0.0/8",
            "TIDEMARK_OUTBOUND_ALLOW_HTTP": "true",
        }
        stack = Stack(var_dir, settings)
        step("Tidemark")
        stack.prepare()
        stack.start()
        # After the stack, before the story: the scenario's deadlines are set when it
        # starts, so a first run's install (about a minute) must come before it.
        step("The dbt environment")
        dbt.ensure_env(Path(args.dbt_venv).resolve())
        Scenario(
            stack=stack,
            s3=s3,
            world=world,
            hooks=hooks,
            pagerduty=pagerduty,
            heartbeat=heartbeat,
            dbt_venv=Path(args.dbt_venv).resolve(),
            report=report,
        ).run()
    except DemoFailed as exc:
        report.check("the scenario ran to the end", "no step failed", str(exc)[:400], False)
        fatal(str(exc))
    except KeyboardInterrupt:
        fatal("interrupted: stopping everything the demo started")
        report.check("the scenario ran to the end", "not interrupted", "interrupted", False)
    except Exception as exc:  # a bug in the demo itself: still stop everything, and say so
        traceback.print_exc()
        report.check("the scenario ran to the end", "no step failed", repr(exc)[:400], False)
    finally:
        step("Stopping everything the demo started")
        for stop in (stack.stop if stack else None, s3.stop, *(r.stop for r in receivers)):
            if stop is None:
                continue
            try:
                stop()
            except Exception:
                traceback.print_exc()
    print()
    print(report.render())
    verdict = "PASSED" if report.passed else "FAILED"
    print(f"\nTidemark demo {verdict} in {time.monotonic() - started:.0f} s")
    logs = [shown(p) for p in (var_dir / "stack.log", var_dir / "moto.log") if p.exists()]
    if not report.passed and logs:
        print(f"Logs: {', '.join(logs)}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
