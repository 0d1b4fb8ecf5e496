"""``make demo``: Tidemark's whole promise in one scripted scenario, driven from outside.

The demo starts the embedded stack (web, Celery worker and beat, the watchdog's loop and
web server) as ``make run`` does, plus moto's S3 server as the object store and three
receivers on loopback (a consumer webhook that verifies Standard Webhooks signatures, a
PagerDuty Events API v2 receiver and a heartbeat receiver), then plays producers,
consumers, on-call and governance through public surfaces only: the REST API, the
``manage.py`` commands an operator runs, S3, the ``openlineage-python`` client and
``dbt-ol``. It exits 0 only when every expectation held, after printing a table of what
was expected against what was observed.

It imports no Tidemark module (an import-linter contract says so).
"""
