"""Django and DRF glue shared by the catalog's API and the watchdog's: RFC 9457 problem
rendering for every error, and strict JSON parsing. Imports no Tidemark app, so the
watchdog can be deployed alone."""
