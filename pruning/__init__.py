"""Retention: deleting what no one needs any more, in short batches.

Each app that keeps history declares one ``Rule`` per table in its own ``retention``
module (``catalog.retention``, ``lineage.retention``, ``watchdog.retention``); this package
runs them (``pruning.engine``) and holds the ``manage.py prune`` command. It imports no
app: which apps a process prunes is the ``TIDEMARK_PRUNE_APPS`` setting (the catalog's
processes prune the catalog and lineage; the watchdog, deployed alone, its own database).
"""
