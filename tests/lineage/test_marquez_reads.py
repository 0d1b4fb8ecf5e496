"""The Marquez-compatible reads cost a fixed number of queries per page, however many
jobs, runs and datasets the page holds (``lineage.marquez.reads``)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from lineage.marquez import reads
from tests.lineage import events as ev

pytestmark = pytest.mark.django_db


def _report(receive, count: int, start: int = 0) -> None:
    for index in range(start, start + count):
        receive(
            ev.run_event(
                "COMPLETE",
                run_id=str(uuid.uuid4()),
                job=(ev.JOB[0], f"job_{index}"),
                inputs=[ev.dataset("postgres://warehouse:5432", "shop.public.orders")],
                outputs=[ev.dataset("s3://lake", f"marts/out_{index}")],
            )
        )


def _queries(read) -> int:
    with CaptureQueriesContext(connection) as captured:
        read()
    return len(captured)


@pytest.mark.parametrize(
    "read",
    [
        lambda viewer: reads.job_list(viewer=viewer, namespace=ev.JOB[0], limit=100, offset=0),
        lambda viewer: reads.dataset_list(namespace="s3://lake", limit=100, offset=0),
        lambda viewer: reads.namespace_list(limit=100, offset=0),
    ],
)
def test_a_page_costs_the_same_queries_for_two_items_as_for_six(receive, process, team_a, read):
    viewer = reads.Viewer(team=team_a, everything=False)
    _report(receive, 2)
    process()
    few = _queries(lambda: read(viewer))
    _report(receive, 4, start=2)
    process()
    assert _queries(lambda: read(viewer)) == few
