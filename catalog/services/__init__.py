"""Writes to the catalog. Every function is keyword-only, typed and transactional.

One module per concern; import the module you need (nothing is re-exported here):

- ``teams``: teams and API keys (create, authenticate, revoke)
- ``datasets``: register and update datasets, apply declarations, attach poll groups
- ``publishing``: publish readiness (``readiness_publish``), and what the poll found
  (``readiness_found``, ``readiness_incomplete``)
- ``publish_steps``: the checks, content, notice and response every publish path shares
- ``one_statement``: PostgreSQL's one-statement publish, its SQL and outbox CTEs
- ``publish_targets``: what a publish reads of its dataset, and the per-process cache
- ``idempotency``: Idempotency-Key claims and replays
- ``subscriptions``: declare and delete subscriptions, catch up on recent notifications
- ``ownership``: claims on shared namespaces, and dataset transfers
- ``usage``: jobs, observed usage, and usage held for unclaimed database roles
- ``aliases``: received spellings and declared symlinks of datasets, and folding usage
  of an alias into its dataset's
- ``run_conflicts``: lineage events that named a run they do not belong to

Who acts is ``catalog.actors.Actor``.
"""
