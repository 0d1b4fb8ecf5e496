"""catalog.timeline and catalog.graph_layout: the dataset page's pictures (no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from catalog import graph_layout, timeline
from schedules import FreshnessSla

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)
SLA = FreshnessSla(cron="0 6 * * *", time_zone="UTC", grace_seconds=3600, partitioning="daily")


def at(day, hour=5):
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def test_last_periods_are_the_closed_ones_oldest_first():
    periods = timeline.last_periods(NOW, "daily", "UTC", 3)
    assert [p.key for p in periods] == ["2026-11-25", "2026-11-26", "2026-11-27"]


def test_last_periods_cut_in_the_partition_time_zone():
    periods = timeline.last_periods(NOW, "daily", "Pacific/Auckland", 1)
    assert periods[0].key == "2026-11-27"  # it is 22:00 on the 28th in Auckland


@pytest.mark.parametrize(
    ("info", "late", "status", "late_seconds", "restated", "by_poll"),
    [
        ({"state": "ready", "ready_at": at(27, 5)}, {}, "on_time", None, False, False),
        # Deadline 06:00 on the 27th, grace one hour: ready at 08:30 is 2.5 h late.
        (
            {"state": "ready", "ready_at": at(27, 8) + timedelta(minutes=30)},
            {},
            "late",
            9000,
            False,
            False,
        ),
        (
            {"state": "ready", "ready_at": at(27, 5), "detected_by": "poll"},
            {},
            "on_time",
            None,
            False,
            True,
        ),
        (
            {"state": "ready", "ready_at": at(27, 5), "revisions": 2},
            {},
            "on_time",
            None,
            True,
            False,
        ),
        # Restated two days after it arrived on time: still on time, marked restated.
        (
            {
                "state": "ready",
                "ready_at": at(29, 5),
                "first_ready_at": at(27, 5),
                "version": "rerun-2",
                "revisions": 2,
            },
            {},
            "on_time",
            None,
            True,
            False,
        ),
        # Late when it arrived, restated since: late by its arrival, not the rerun.
        (
            {"state": "ready", "ready_at": at(29, 5), "first_ready_at": at(27, 9), "revisions": 2},
            {},
            "late",
            3 * 3600,
            True,
            False,
        ),
        ({"state": "failed"}, {}, "failed", None, False, False),
        ({}, {}, "missing", 3600 * 27, False, False),
        ({"state": "pending"}, {}, "missing", 3600 * 27, False, False),
        # Found late by the evaluation, then ready inside what is now the grace.
        (
            {
                "state": "ready",
                "ready_at": at(
                    27,
                    6,
                )
                + timedelta(minutes=30),
            },
            {"2026-11-26": None},
            "late",
            1800,
            False,
            False,
        ),
    ],
)
def test_cells_classify_each_period(info, late, status, late_seconds, restated, by_poll):
    periods = timeline.last_periods(NOW, "daily", "UTC", 3)
    (cell,) = [
        c
        for c in timeline.cells(
            periods, partitions={"2026-11-26": info}, late_keys=late, sla=SLA, now=NOW
        )
        if c.key == "2026-11-26"
    ]
    assert (cell.status, cell.late_seconds, cell.restated, cell.by_poll) == (
        status,
        late_seconds,
        restated,
        by_poll,
    )


def test_cells_of_the_last_period_are_due_inside_grace_and_awaiting_before_the_deadline():
    periods = timeline.last_periods(NOW, "daily", "UTC", 1)  # 2026-11-27, deadline 28th 06:00
    due = timeline.cells(
        periods,
        partitions={},
        late_keys={},
        sla=SLA,
        now=at(
            28,
            6,
        )
        + timedelta(minutes=30),
    )
    waiting = timeline.cells(periods, partitions={}, late_keys={}, sla=SLA, now=at(28, 5))
    assert (due[0].status, waiting[0].status) == ("due", "awaiting")


def test_cells_without_sla_are_missing_or_pending_never_late():
    periods = timeline.last_periods(NOW, "daily", "UTC", 2)
    cells = timeline.cells(
        periods, partitions={"2026-11-27": {"state": "pending"}}, late_keys={}, sla=None, now=NOW
    )
    assert [c.status for c in cells] == ["missing", "pending"]
    assert [c.x for c in cells] == [0, timeline.CELL_WIDTH + timeline.GAP]


def node(kind, name, **extra):
    return {"id": f"{kind}:ns:{name}", "type": kind, "namespace": "ns", "name": name, **extra}


def edge(source, target, verified=True):
    return {
        "source": source,
        "target": target,
        "direction": "read",
        "run_count": 1,
        "verified": verified,
    }


def test_layers_put_upstream_left_and_downstream_right_of_the_root():
    edges = [("a", "j1"), ("j1", "root"), ("root", "j2"), ("j2", "b"), ("j2", "c")]
    layers = graph_layout.layers(["a", "b", "c", "j1", "j2", "root", "x"], edges, "root")
    assert layers == {"a": -2, "j1": -1, "root": 0, "j2": 1, "b": 2, "c": 2, "x": 0}


def test_layers_of_a_cycle_keep_the_first_way_found():
    assert graph_layout.layers(["r", "j"], [("r", "j"), ("j", "r")], "r") == {"r": 0, "j": 1}


def test_layout_places_columns_and_curves():
    root, job, out = (
        node("dataset", "raw/orders", dataset_id=1, catalogued=True),
        node("job", "rollup", team="analytics"),
        node("dataset", "marts/orders_daily_rollup_for_the_board_report"),
    )
    graph = {
        "root": root["id"],
        "truncated": False,
        "nodes": [root, job, out],
        "edges": [edge(root["id"], job["id"]), edge(job["id"], out["id"], verified=False)],
    }
    placed = graph_layout.layout(graph)
    boxes = {b.id: b for b in placed.boxes}
    assert boxes[root["id"]].x < boxes[job["id"]].x < boxes[out["id"]].x
    assert boxes[root["id"]].root and boxes[root["id"]].dataset_id == 1
    assert boxes[job["id"]].caption == "analytics · ns"
    assert boxes[out["id"]].label.startswith("…") and len(boxes[out["id"]].label) == 30
    assert placed.width == 2 * 8 + 3 * 200 + 2 * 56 and placed.height == 2 * 8 + 40
    assert placed.links[0].path.startswith(f"M{8 + 200},{8 + 20} C")
    assert [link.verified for link in placed.links] == [True, False]


def test_layout_orders_a_column_by_its_neighbours():
    r = node("dataset", "r")
    jobs = [node("job", n) for n in ("j-b", "j-a")]
    outs = [node("dataset", n) for n in ("z-from-a", "a-from-b")]
    graph = {
        "root": r["id"],
        "truncated": False,
        "nodes": [r, *jobs, *outs],
        "edges": [
            edge(r["id"], jobs[0]["id"]),
            edge(r["id"], jobs[1]["id"]),
            edge(jobs[1]["id"], outs[0]["id"]),
            edge(jobs[0]["id"], outs[1]["id"]),
        ],
    }
    boxes = {b.label: b for b in graph_layout.layout(graph).boxes}
    # j-a is above j-b (by name); so its output is above j-b's output, whatever their names.
    assert boxes["j-a"].y < boxes["j-b"].y
    assert boxes["z-from-a"].y < boxes["a-from-b"].y
