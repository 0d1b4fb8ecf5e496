"""Tidemark's PostgreSQL database backend (``ENGINE = "config.postgresql"``)."""
