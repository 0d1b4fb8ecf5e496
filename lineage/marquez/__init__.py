"""A Marquez-compatible read view of the lineage Tidemark holds (Marquez's API v1, as the
``marquez-python`` client and Marquez's web UI call it): ``paths`` and ``nodes`` parse what
callers send, ``shapes`` builds Marquez's response objects, ``facets`` folds raw events
into facets, ``reads`` queries the catalog's and lineage's tables. Pure modules have no
ORM; only ``reads`` touches the database."""
