"""Lineage problems, each with a stable code (rendered by api/ as RFC 9457)."""

from problems import NotFound, Problem


class EventInvalid(Problem):
    """A required core field of an OpenLineage event is missing, empty or malformed."""

    code = "invalid_openlineage_event"
    title = "The OpenLineage event is not valid"
    status = 422


class EventTimeInvalid(Problem):
    """``eventTime`` is not an RFC 3339 date-time."""

    code = "invalid_event_time"
    title = "eventTime is not a valid date-time"
    status = 400


class RunNotFound(NotFound):
    code = "run_not_found"
    title = "Run not found"


class CollectorUnknown(NotFound):
    """No lineage collector of that name in ``TIDEMARK_LINEAGE_COLLECTORS``."""

    code = "collector_not_found"
    title = "No such lineage collector"


class MarquezNotFound(NotFound):
    """The Marquez-compatible API names a namespace, dataset, dataset version, job or run
    that Tidemark's lineage does not hold (or, for a run, one the caller may not see)."""

    code = "marquez_not_found"
    title = "No such namespace, dataset, job or run in lineage"
