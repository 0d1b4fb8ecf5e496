"""Serve ``/metrics`` for a host that runs Celery workers but no Tidemark web server."""

from django.core.management.base import BaseCommand, CommandError

from httpkit.metrics_server import make_server


class Command(BaseCommand):
    help = (
        "Serve GET /metrics with the counters this host's Tidemark processes write to "
        "PROMETHEUS_MULTIPROC_DIR (for a host with workers and no web server)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=9808)

    def handle(self, *args, host, port, **options):
        try:
            server = make_server(host, port)
        except (RuntimeError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        bound_host, bound_port = server.server_address[:2]
        self.stdout.write(f"serving /metrics on http://{bound_host}:{bound_port}/metrics")
        self.stdout.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
