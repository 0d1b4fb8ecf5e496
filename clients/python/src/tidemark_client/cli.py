"""The ``tidemark`` command line.

    tidemark publish DATASET PARTITION [--state ready|failed] [--version V] ...
    tidemark wait DATASET PARTITION [--timeout 3600] [--interval 15]
    tidemark run [--ping-url URL] -- COMMAND [ARG ...]
    tidemark datasets [--owner TEAM] [--json]
    tidemark apply FILE [--dry-run] [--json]

DATASET is a dataset's URI in the OpenLineage naming spec (``s3://lake/raw/orders``) or
its id. The catalog is ``--url`` or ``TIDEMARK_URL``, the key ``--api-key`` or
``TIDEMARK_API_KEY``; ``run``'s ping URL is ``--ping-url`` or ``TIDEMARK_PING_URL``.

Exit statuses: 0 done (``wait``: ready); 1 an error (a problem answer, no answer, a bad
file); 2 a usage error; ``wait`` only: 3 the partition is failed, 4 the timeout passed.
``run`` exits with its command's status.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import __version__
from .client import Client
from .errors import PartitionFailed, ProblemError, TidemarkError, WaitTimeout
from .models import Dataset, DatasetRef, Partition
from .pings import Pinger, run_with_pings

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FAILED, EXIT_TIMEOUT = 0, 1, 2, 3, 4
TABLE_COLUMNS = ("id", "dataset", "owner", "criticality", "partitioning", "lifecycle")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (the console script exits with it)."""
    args = _parser().parse_args(argv)
    try:
        return args.handler(args)
    except ProblemError as exc:
        _print_problem(exc)
        return EXIT_ERROR
    except (TidemarkError, OSError, ValueError) as exc:
        print(f"tidemark: {exc}", file=sys.stderr)
        return EXIT_ERROR


def _client(args: argparse.Namespace) -> Client:
    return Client(args.url, args.api_key, timeout=args.http_timeout)


def _publish(args: argparse.Namespace) -> int:
    with _client(args) as client:
        if args.dataset.isdigit():
            ref = client.dataset(int(args.dataset)).ref
        else:
            ref = DatasetRef.parse(args.dataset)
        result = client.publish(
            ref.namespace,
            ref.name,
            args.partition,
            state=args.state,
            version=args.version,
            code_version=args.code_version,
            metadata=_json_object(args.metadata, "--metadata"),
            manifest=_json_object(args.manifest, "--manifest"),
            idempotency_key=args.idempotency_key,
            use_idempotency_key=not args.no_idempotency_key,
        )
    if args.json:
        print(json.dumps(result.raw, indent=2))
    else:
        what = "unchanged" if result.status_code == 200 else "recorded"
        replay = ", replayed" if result.replayed else ""
        version = f" version {result.version}" if result.version else ""
        partition = args.partition or "(unpartitioned)"
        print(f"{ref} {partition}: {result.state}{version} ({what}{replay})")
    return EXIT_OK


def _wait(args: argparse.Namespace) -> int:
    def progress(found: Partition | None, error: Exception | None) -> None:
        if args.quiet or (found is not None and found.state in ("ready", "failed")):
            return  # the outcome is printed once, below
        state = f"error: {error}" if error else (found.state if found else "missing")
        print(f"tidemark: {args.dataset} {args.partition}: {state}", file=sys.stderr)

    with _client(args) as client:
        dataset = client.dataset(args.dataset)
        try:
            partition = client.wait_ready(
                dataset.id,
                args.partition,
                timeout=args.timeout,
                interval=args.interval,
                on_poll=progress,
            )
        except PartitionFailed as exc:
            print(f"tidemark: {dataset.ref} {args.partition} is failed", file=sys.stderr)
            _print_partition(exc.partition, args.json)
            return EXIT_FAILED
        except WaitTimeout as exc:
            print(f"tidemark: {exc}", file=sys.stderr)
            return EXIT_TIMEOUT
    _print_partition(partition, args.json)
    return EXIT_OK


def _print_partition(partition: Partition, as_json: bool) -> None:
    if as_json:
        print(json.dumps(partition.raw, indent=2))
    else:
        version = f" version {partition.version}" if partition.version else ""
        print(f"{partition.key}: {partition.state}{version}")


def _run(args: argparse.Namespace) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        print("tidemark run: give the command after --", file=sys.stderr)
        return EXIT_USAGE
    url = args.ping_url or os.environ.get("TIDEMARK_PING_URL")
    if not url:
        print("tidemark run: pass --ping-url or set TIDEMARK_PING_URL", file=sys.stderr)
        return EXIT_USAGE
    pinger = Pinger(url, timeout=args.http_timeout)
    try:
        return run_with_pings(
            pinger,
            command,
            run_id=args.run_id,
            warn=lambda text: print(f"tidemark run: {text}", file=sys.stderr),
        )
    finally:
        pinger.close()


def _datasets(args: argparse.Namespace) -> int:
    filters = {"owner": args.owner, "namespace": args.namespace, "q": args.q}
    with _client(args) as client:
        found = list(client.datasets(**{k: v for k, v in filters.items() if v}))
    if args.json:
        print(json.dumps([d.raw for d in found], indent=2))
    else:
        print(_table(found))
    return EXIT_OK


def _table(datasets: list[Dataset]) -> str:
    rows = [TABLE_COLUMNS] + [
        (str(d.id), str(d.ref), d.owner, d.criticality, d.partitioning, d.lifecycle)
        for d in datasets
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in rows
    )


def _apply(args: argparse.Namespace) -> int:
    path = Path(args.file)
    content_type = "application/json" if path.suffix == ".json" else "application/yaml"
    with _client(args) as client:
        plan = client.apply(path.read_bytes(), content_type=content_type, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(plan, indent=2))
        return EXIT_OK
    marks = {"create": "+", "update": "~", "unchanged": "="}
    for item in plan["datasets"]:
        mark, label = marks.get(item["action"], "?"), f"{item['namespace']}/{item['name']}"
        print(f"{mark} {label} ({item['action']})")
        for field, change in item["changes"].items():
            old = "" if item["action"] == "create" else f"{change['old']!r} -> "
            print(f"    {field}: {old}{change['new']!r}")
        for warning in item.get("warnings", []):
            print(f"    ! {warning['field']}: {warning['message']} ({warning['code']})")
    for label in plan.get("not_declared", []):
        print(f"? {label} (not declared; left alone)")
    if not plan["changed"]:
        print("no changes")
    elif args.dry_run:
        print("dry run: nothing changed; run again without --dry-run to apply")
    else:
        print("applied")
    return EXIT_OK


def _json_object(text: str | None, option: str) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{option} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError(f"{option} must be a JSON object")
    return value


def _print_problem(exc: ProblemError) -> None:
    print(f"tidemark: {exc.status} {exc.code}: {exc.detail or exc.title}", file=sys.stderr)
    for error in exc.errors:
        print(f"  {error.field}: {error.detail} ({error.rule})", file=sys.stderr)


def _common(suppress: bool) -> argparse.ArgumentParser:
    """The connection options, accepted before or after the command (after it, only an
    option given there overrides)."""
    default = argparse.SUPPRESS if suppress else None
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--url", default=default, help="the catalog's URL (TIDEMARK_URL)")
    parser.add_argument("--api-key", default=default, help="an API key (TIDEMARK_API_KEY)")
    parser.add_argument(
        "--http-timeout",
        type=float,
        default=argparse.SUPPRESS if suppress else 30.0,
        metavar="SECONDS",
        help="seconds for each HTTP request (default 30)",
    )
    return parser


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tidemark",
        description="Tidemark's command line: publish and wait for partitions, ping the "
        "watchdog around a job, list datasets, apply declarations.",
        epilog="Exit statuses: 0 done; 1 error; 2 usage; wait: 3 failed, 4 timed out.",
        parents=[_common(suppress=False)],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command_name", required=True, metavar="COMMAND")
    common = _common(suppress=True)

    publish = commands.add_parser("publish", parents=[common], help="publish a partition")
    publish.add_argument("dataset", help="dataset URI (s3://lake/raw/orders) or id")
    publish.add_argument("partition", nargs="?", default="", help="key; omit if unpartitioned")
    publish.add_argument("--state", choices=("ready", "failed"), default="ready")
    publish.add_argument("--version", help="the producer's label for this content")
    publish.add_argument("--code-version", help="what produced it (a commit)")
    publish.add_argument("--metadata", metavar="JSON", help="a JSON object kept on the revision")
    publish.add_argument("--manifest", metavar="JSON", help='e.g. {"expected_files": 3}')
    publish.add_argument(
        "--idempotency-key", metavar="KEY", help="default: a new random key, kept for retries"
    )
    publish.add_argument(
        "--no-idempotency-key", action="store_true", help="send no Idempotency-Key"
    )
    publish.add_argument("--json", action="store_true", help="print the answer as JSON")
    publish.set_defaults(handler=_publish)

    wait = commands.add_parser(
        "wait",
        parents=[common],
        help="block until a partition is ready",
        epilog="Exit statuses: 0 ready, 1 error, 2 usage, 3 failed, 4 timed out.",
    )
    wait.add_argument("dataset", help="dataset URI (s3://lake/raw/orders) or id")
    wait.add_argument("partition", help="the partition key")
    wait.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS")
    wait.add_argument("--interval", type=float, default=15.0, metavar="SECONDS")
    wait.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    wait.add_argument("--json", action="store_true", help="print the partition as JSON")
    wait.set_defaults(handler=_wait)

    run = commands.add_parser(
        "run", parents=[common], help="run a command between start and exit pings"
    )
    run.add_argument("--ping-url", help="the monitor's ping URL (TIDEMARK_PING_URL)")
    run.add_argument("--run-id", metavar="UUID", help="the rid to send (default: a new one)")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARG ...]")
    run.set_defaults(handler=_run)

    datasets = commands.add_parser("datasets", parents=[common], help="list datasets")
    datasets.add_argument("--owner", help="a team's slug")
    datasets.add_argument("--namespace")
    datasets.add_argument("--q", help="a substring of the name or description")
    datasets.add_argument("--json", action="store_true", help="print them as JSON")
    datasets.set_defaults(handler=_datasets)

    apply = commands.add_parser("apply", parents=[common], help="apply a declaration file")
    apply.add_argument("file", help="the declaration, YAML (or JSON with a .json name)")
    apply.add_argument("--dry-run", action="store_true", help="only show the plan")
    apply.add_argument("--json", action="store_true", help="print the plan as JSON")
    apply.set_defaults(handler=_apply)
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
