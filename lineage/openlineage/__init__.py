"""OpenLineage events (spec 2-0-2, ``spec/OpenLineage.json``): the core validated, facets opaque.

Pure: no ORM. The openlineage-python models validate nothing they are given, so this
module checks the core of an event itself, as Marquez does, and keeps every facet as the
JSON it arrived as:

- **Kind** (the spec's ``oneOf``): as Marquez does, a ``schemaURL`` whose fragment is
  ``#/$defs/JobEvent`` or ``#/$defs/DatasetEvent`` names the kind; otherwise a body
  with ``run`` or ``eventType`` is a RunEvent; else one with ``dataset`` and no ``job`` a
  DatasetEvent; else one with ``job`` a JobEvent. Anything else is judged as a RunEvent,
  the common case. A JobEvent or DatasetEvent's ``eventType``, if sent, is not kept.
- **Required identifiers** (``EventInvalid``, 422, naming each field): ``eventTime``,
  ``run.runId`` (a UUID), ``job.namespace`` and ``job.name`` (at most 255 and 1024
  characters), and ``namespace`` / ``name`` of every dataset (``inputs.N``, ``outputs.N``,
  ``dataset``); ``eventType``, when given, one of the spec's six.
- **eventTime** (``EventTimeInvalid``, 400, when present but not a date-time): RFC 3339;
  one without an offset is read as UTC and the event says so
  (``event_time_assumed_utc``); fractions beyond microseconds are truncated.
- **Facets** (run, job, dataset, input and output facets): unknown and custom facets are
  kept as they are; a dataset's well-formed ``schema`` facet is read into its ``schema``
  (``catalog.schemas``: a column without ``name``, a non-string ``type`` ... is flagged),
  its well-formed ``symlinks`` facet into its ``symlinks``. A standard facet missing what
  its schema requires (an ``ownership`` owner without ``name``, a ``parent`` without
  ``run.runId`` ...) or any facet that is not an object does not sink the event: it is
  listed in ``problems`` and left unused.
- **Dataset identities** are normalised with ``catalog.identity`` (the function used at
  registration); one that breaks a naming rule (whitespace, a malformed namespace) is
  listed in ``problems`` and not recorded as usage.
- **SQL**: a RunEvent's well-formed ``sql`` job facet is parsed (``lineage.sql``) when
  one of its datasets is on a SQL engine (which tells where the query ran); the tables
  its query reads are ``sql_reads``. A query that does not parse is listed in
  ``problems`` (its statements that parse still count).
"""

from .datasets import MAX_SYMLINKS, DatasetRef
from .event_time import parse_event_time
from .events import EVENT_TYPES, SPEC_VERSION, OpenLineageEvent, event_fingerprint, parse_event
from .facets import ParentRun
from .fields import DATASET, JOB, RUN

__all__ = [
    "DATASET",
    "EVENT_TYPES",
    "JOB",
    "MAX_SYMLINKS",
    "RUN",
    "SPEC_VERSION",
    "DatasetRef",
    "OpenLineageEvent",
    "ParentRun",
    "event_fingerprint",
    "parse_event",
    "parse_event_time",
]
