"""gunicorn hooks for Tidemark's web servers (the catalog's and the watchdog's): the
Procfile starts both with ``-c config/gunicorn.py``; options stay on the command line.

With ``PROMETHEUS_MULTIPROC_DIR`` set, every worker writes its metrics to files there and
``GET /metrics`` sums them (``httpkit.metrics``). When a worker exits (a restart, a
timeout, a crash), its counters and histograms stay counted: Prometheus counters never go
down. ``mark_process_dead`` removes only the exited process's live gauge files, so a dead
worker is not reported as if alive. The directory must be emptied before the processes
that share it start (``bin/run`` does; docs/operations.md, Metrics).

gunicorn's own records (``gunicorn.error``: start-up, worker boots and timeouts) go
through the same handler as Django's, in ``TIDEMARK_LOG_FORMAT`` (``httpkit.logs``), read
from the environment and ``.env`` as the settings read it. gunicorn's access log stays
off (the Procfile passes no ``--access-logfile``): ``httpkit.access`` logs one line per
request, with the route, the team and the request id gunicorn does not know.
"""

import os
from pathlib import Path

import environ

from httpkit.logs import configure_structlog, logging_config

_env = environ.Env()
if not _env.bool("TIDEMARK_IGNORE_DOTENV", default=False):
    environ.Env.read_env(Path(__file__).resolve().parent.parent / ".env", overwrite=False)


def _gunicorn_logging() -> dict:
    """Django's ``LOGGING`` for the arbiter, with gunicorn's error log handing its records
    to the root's handler (gunicorn's own handlers are removed by naming them here), and
    its access log silenced: with a logging dict gunicorn logs access lines whatever
    ``--access-logfile`` says, at INFO."""
    config = logging_config(
        log_format=_env.str("TIDEMARK_LOG_FORMAT", default="plain"),
        level=_env.str("TIDEMARK_LOG_LEVEL", default="INFO"),
    )
    config["loggers"].update(
        {
            "gunicorn.error": {"level": "INFO", "handlers": [], "propagate": True},
            "gunicorn.access": {"level": "WARNING", "handlers": [], "propagate": False},
        }
    )
    return config


configure_structlog()
logconfig_dict = _gunicorn_logging()


def child_exit(server, worker) -> None:
    """gunicorn's hook, in the arbiter, after a worker exited."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
