"""The embedded demo's catalog: its teams and datasets (``world``) and a month of their
history written through the catalog's own services (``history``), with the outbox settled
as if the workers had run all along (``outbox``).

Only ``load_demo`` (``make run``, embedded mode) and the tests use it; nothing of the
catalog's runtime imports it.
"""
