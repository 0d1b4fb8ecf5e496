"""Writes of lineage: receiving OpenLineage events and processing them into runs, jobs and
observed usage. Every function is keyword-only and typed.

Receiving stores the raw event in one short transaction and rings the lineage doorbell
after commit. Processing is the outbox pattern of catalog deliveries (DESIGN.md
principles 1 and 2): pending events are claimed with a lease under ``FOR UPDATE SKIP
LOCKED``, a claimed batch is applied in one transaction fenced by its claim token (each
event under its own savepoint, so one failing event does not undo the others), and the
beat sweep finds events whose doorbell was lost or whose worker died. Applying an event is
idempotent and order-independent, so processing one twice, or its run's events in any
order, leaves the same runs, jobs and usage; the one exception is a run no verified event
reached, reported (unverified) by two jobs or teams: the first processed makes it, and
the other is the conflict (``lineage.runstate.judge``).

One module per concern; import the module you need (nothing is re-exported here):

- ``receiving``: ``lineage_event_receive`` and the doorbell it rings
- ``processing``: claiming, processing and sweeping received events
- ``runs``: the run rows and run edges processing writes, runs taken over by verified
  events, conflicts recorded, edges moved when usage rows merge
- ``collecting``: ``collector_run``, pulled access history
"""
