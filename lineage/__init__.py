"""How Tidemark learns usage: OpenLineage ingestion and access-history collectors.

Records what it learns into the catalog through catalog services.
"""
