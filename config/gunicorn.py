"""gunicorn hooks for Tidemark's web servers (the catalog's and the watchdog's): the
Procfile starts both with ``-c config/gunicorn.py``; options stay on the command line.

With ``PROMETHEUS_MULTIPROC_DIR`` set, every worker writes its metrics to files there and
``GET /metrics`` sums them (``httpkit.metrics``). When a worker exits (a restart, a
timeout, a crash), its counters and histograms stay counted: Prometheus counters never go
down. ``mark_process_dead`` removes only the exited process's live gauge files, so a dead
worker is not reported as if alive. The directory must be emptied before the processes
that share it start (``bin/run`` does; docs/operations.md, Metrics).
"""

import os


def child_exit(server, worker) -> None:
    """gunicorn's hook, in the arbiter, after a worker exited."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
