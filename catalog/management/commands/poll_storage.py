"""Run one sweep of the fallback poll in the foreground, without Celery."""

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from catalog import polling
from catalog.models import Dataset, StorageGroup
from catalog.services import datasets


class Command(BaseCommand):
    help = (
        "Sweep storage now (every polled group, or one dataset's) and print what it cost and "
        "found: List calls, pages, objects, partitions found, missed events."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--dataset", nargs=2, metavar=("NAMESPACE", "NAME"), help="Sweep only this dataset."
        )
        parser.add_argument(
            "--recent",
            action="store_true",
            help="List only the lookback window, as regular sweeps do (default: everything).",
        )

    def handle(self, *args, dataset=None, recent=False, **options):
        now = timezone.now()
        if dataset:
            identity = datasets.normalised_identity(*dataset)
            found = Dataset.objects.filter(namespace=identity.namespace, name=identity.name).first()
            if found is None:
                raise CommandError(f"no dataset {identity.namespace}/{identity.name}")
            try:
                reports = [polling.sweep_dataset(found, now=now, full=not recent)]
            except ValueError as exc:
                raise CommandError(str(exc)) from exc
        else:
            reports = [
                polling.sweep_group(group, now=now, full=not recent)
                for group in StorageGroup.objects.order_by("source", "prefix")
            ]
        for report in reports:
            for item in report.found:
                self.stdout.write(f"found: {item}")
            status = f"error: {report.error}" if report.error else "ok"
            self.stdout.write(
                f"{report.group}: {report.list_calls} List calls, {report.pages} pages, "
                f"{report.objects_seen} objects, {report.partitions_found} partitions found, "
                f"{report.missed_events} missed events, {report.incomplete} incomplete ({status})"
            )
        if not reports:
            self.stdout.write("no storage groups: no dataset names a storage location")
        if any(r.error for r in reports):
            raise CommandError("some sweeps failed")
