"""Reads behind the Marquez-compatible API: namespaces, datasets, jobs and runs from the
catalog's usage tables (``Job``, ``DatasetUsage``, registered ``Dataset``) and lineage's
runs and raw events, shaped by ``shapes``.

What is where:

- a **namespace** is any job namespace or dataset namespace seen in lineage or
  registered; a **dataset** any identity seen in usage, stated in static lineage
  (``catalog.StaticLineage``: JobEvents and DatasetEvents) or registered; a **job** any
  job seen (``catalog.Job``), whose inputs and outputs are its observed usage and the
  static lineage its latest JobEvent stated;
- a dataset's **facets** are those of the latest run that read or wrote it, folded from
  that run's raw events (``facets.fold``); raw events are kept
  ``TIDEMARK_RETAIN_LINEAGE_EVENTS_DAYS``, so facets of older runs read as ``{}`` (a
  registered dataset's fields then come from its latest schema observation);
- a dataset **version** is a run that wrote it (the version id is the run's id), as in
  Marquez each run writing a dataset makes a version of it.

Runs are shown to whom ``lineage.selectors`` shows them (``Viewer``); namespaces,
datasets, jobs and the graph are every team's, as Tidemark's own lineage graph is.
"""

from .common import Identity, Viewer, identities_q
from .datasets import (
    dataset_exists,
    dataset_facet_map,
    dataset_get,
    dataset_list,
    dataset_version_get,
    dataset_version_list,
    dataset_views,
)
from .jobs import job_exists, job_get, job_list, job_views
from .namespaces import namespace_exists, namespace_get, namespace_list
from .runs import job_run_list, run_facets, run_get

__all__ = [
    "Identity",
    "Viewer",
    "dataset_exists",
    "dataset_facet_map",
    "dataset_get",
    "dataset_list",
    "dataset_version_get",
    "dataset_version_list",
    "dataset_views",
    "identities_q",
    "job_exists",
    "job_get",
    "job_list",
    "job_run_list",
    "job_views",
    "namespace_exists",
    "namespace_get",
    "namespace_list",
    "run_facets",
    "run_get",
]
