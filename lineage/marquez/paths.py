"""Marquez's routes under ``/api/v1/namespaces/``: which operation a path names (pure).

Marquez's clients percent-encode each path segment, so a namespace such as
``s3://lake`` or a dataset name such as ``marts/daily_orders`` travels as one segment
(``s3%3A%2F%2Flake``). When the server passes the path as sent (``RAW_URI`` under gunicorn,
``REQUEST_URI`` elsewhere) it is split on its slashes exactly (``exact_routes``). A WSGI
server that gives only the decoded path has lost where the segments end, so every reading
of it is listed (``candidate_routes``), most specific first, and the reader picks the
first whose namespace, dataset or job exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

NAMESPACE = "namespace"
DATASETS = "datasets"
DATASET = "dataset"
DATASET_VERSIONS = "dataset_versions"
DATASET_VERSION = "dataset_version"
JOBS = "jobs"
JOB = "job"
JOB_RUNS = "job_runs"

PREFIX = "/api/v1/namespaces/"


@dataclass(frozen=True)
class Route:
    """One reading of a path: the operation (``kind``), the namespace, and the dataset or
    job ``name`` and dataset ``version`` where the operation has them ("" otherwise)."""

    kind: str
    namespace: str
    name: str = ""
    version: str = ""


def exact_routes(raw_path: str) -> list[Route]:
    """The one route an undecoded path names, or none.

    Args:
        raw_path: the request's path as sent, percent-encoding kept, query string
            allowed (dropped), holding ``/api/v1/namespaces/``.

    Returns:
        ``[route]``, or ``[]`` when the path names no Marquez operation.
    """
    path = raw_path.split("?", 1)[0]
    _, found, rest = path.partition(PREFIX)  # after any prefix the site is mounted under
    if not found:
        return []
    parts = [unquote(part) for part in rest.split("/")]
    if any(part == "" for part in parts):
        return []
    namespace, rest = parts[0], parts[1:]
    shapes = {
        (): NAMESPACE,
        ("datasets",): DATASETS,
        ("datasets", None): DATASET,
        ("datasets", None, "versions"): DATASET_VERSIONS,
        ("datasets", None, "versions", None): DATASET_VERSION,
        ("jobs",): JOBS,
        ("jobs", None): JOB,
        ("jobs", None, "runs"): JOB_RUNS,
    }
    for shape, kind in shapes.items():
        if len(shape) == len(rest) and all(
            s is None or s == r for s, r in zip(shape, rest, strict=True)
        ):
            name = rest[1] if len(rest) > 1 else ""
            version = rest[3] if len(rest) > 3 else ""
            return [Route(kind, namespace, name, version)]
    return []


_MARKER = re.compile(r"/(datasets|jobs)(?=/|$)")
_VERSION = re.compile(r"^(?P<name>.+)/versions/(?P<version>[^/]+)$")


def candidate_routes(decoded: str) -> list[Route]:
    """Every reading of a decoded path after ``/api/v1/namespaces/``, most specific first.

    Args:
        decoded: the rest of the path, percent-decoded (``s3://lake/datasets/marts/x``).

    Returns:
        Routes: for each ``/datasets`` or ``/jobs`` in the path, the operations it can
        name there (a dataset's versions before the dataset named ``.../versions``), and
        last the whole path as a namespace. Empty when ``decoded`` is.
    """
    if not decoded:
        return []
    found: list[Route] = []
    for match in _MARKER.finditer(decoded):
        namespace, tail = decoded[: match.start()], decoded[match.end() :]
        if not namespace:
            continue
        if match.group(1) == "datasets":
            found += _dataset_routes(namespace, tail)
        else:
            found += _job_routes(namespace, tail)
    found.append(Route(NAMESPACE, decoded))
    return found


def _dataset_routes(namespace: str, tail: str) -> list[Route]:
    if not tail:
        return [Route(DATASETS, namespace)]
    name = tail[1:]
    if not name:
        return []
    routes = []
    version = _VERSION.match(name)
    if version:
        routes.append(Route(DATASET_VERSION, namespace, version["name"], version["version"]))
    if name.endswith("/versions") and len(name) > len("/versions"):
        routes.append(Route(DATASET_VERSIONS, namespace, name[: -len("/versions")]))
    routes.append(Route(DATASET, namespace, name))
    return routes


def _job_routes(namespace: str, tail: str) -> list[Route]:
    if not tail:
        return [Route(JOBS, namespace)]
    name = tail[1:]
    if not name:
        return []
    routes = []
    if name.endswith("/runs") and len(name) > len("/runs"):
        routes.append(Route(JOB_RUNS, namespace, name[: -len("/runs")]))
    routes.append(Route(JOB, namespace, name))
    return routes
