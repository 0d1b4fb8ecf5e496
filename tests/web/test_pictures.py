"""catalog.timeline and catalog.graph_layout: the dataset page's pictures (no database)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
        # Deadline 06:00 on the 27th, grace one hour: ready at 08:30 is 1.5 h late (late
        # counts from deadline plus grace, as freshness does).
        (
            {"state": "ready", "ready_at": at(27, 8) + timedelta(minutes=30)},
            {},
            "late",
            5400,
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
        # A first publish that names its version, or a version ready after a failed one,
        # replaced nothing: not restated.
        (
            {"state": "ready", "ready_at": at(27, 5), "first_ready_at": at(27, 5), "version": "v1"},
            {},
            "on_time",
            None,
            False,
            False,
        ),
        (
            {
                "state": "ready",
                "ready_at": at(27, 5),
                "first_ready_at": at(27, 5),
                "version": "v2",
                "revisions": 2,
            },
            {},
            "on_time",
            None,
            False,
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
            2 * 3600,  # from 07:00, deadline plus grace
            True,
            False,
        ),
        ({"state": "failed"}, {}, "failed", None, False, False),
        ({}, {}, "missing", 3600 * 26, False, False),  # since the 27th 07:00
        ({"state": "pending"}, {}, "missing", 3600 * 26, False, False),
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
            0,  # ready before deadline plus grace (by today's grace)
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
    # The long name wraps after a separator; every box grows to two lines, rows aligned.
    assert boxes[out["id"]].label == "marts/orders_daily_rollup_for_the_board_report"
    assert boxes[out["id"]].lines == ("marts/orders_daily_", "rollup_for_the_board_report")
    assert boxes[root["id"]].lines == ("raw/orders",)
    assert placed.box_height == 17 + 2 * 15 + 8
    assert placed.width == 2 * 8 + 3 * 220 + 2 * 56 and placed.height == 2 * 8 + 55
    assert placed.links[0].path.startswith(f"M{8 + 220},{8 + 27} C")
    assert [link.verified for link in placed.links] == [True, False]
    assert boxes[out["id"]].title == "dataset ns/marts/orders_daily_rollup_for_the_board_report"
    assert boxes[out["id"]].line_ys == [
        ("marts/orders_daily_", boxes[out["id"]].y + 17),
        ("rollup_for_the_board_report", boxes[out["id"]].y + 32),
    ]
    assert boxes[out["id"]].caption_y == boxes[out["id"]].y + 47


def test_layout_of_short_names_keeps_one_line_boxes():
    root, job = node("dataset", "raw/orders"), node("job", "rollup")
    graph = {
        "root": root["id"],
        "truncated": False,
        "nodes": [root, job],
        "edges": [edge(root["id"], job["id"])],
    }
    placed = graph_layout.layout(graph)
    assert placed.box_height == 40 and placed.height == 2 * 8 + 40
    assert all(len(box.lines) == 1 for box in placed.boxes)


WIDTH = graph_layout.TEXT_WIDTH


@pytest.mark.parametrize(
    ("text", "lines", "shown"),
    [
        ("raw/orders", 2, ("raw/orders",)),
        # Wrapped after a separator, the second line as full as it can be.
        (
            "curated/orders_daily_by_market_and_channel",
            2,
            ("curated/orders_daily_", "by_market_and_channel"),
        ),
        # No separator: cut where the line is full.
        ("a" * 60, 2, ("…" + "a" * 21, "a" * 23)),
        # Longer than two lines: the start is dropped, the end (the most specific) kept.
        (
            "warehouse/landing/vendor_feeds/partner_orders/curated_orders_daily_snapshot",
            2,
            ("…s/partner_orders/curated_", "orders_daily_snapshot"),
        ),
        ("s3://lake/warehouse/curated/orders", 1, ("…arehouse/curated/orders",)),
    ],
)
def test_fit_wraps_at_separators_and_keeps_the_end(text, lines, shown):
    assert graph_layout.fit(text, width=WIDTH, px=12, lines=lines) == shown
    assert all(graph_layout.text_width(line, 12) <= WIDTH for line in shown)


def test_text_width_bounds_every_character():
    assert graph_layout.text_width("", 12) == 0
    assert graph_layout.text_width("W", 10) > graph_layout.text_width("i", 10)
    # Outside ASCII: a full-width character at least one em, a combining mark nothing.
    assert graph_layout.text_width("データ", 12) >= 3 * 12
    assert graph_layout.text_width("e\u0301", 12) == graph_layout.text_width("e", 12)


_names = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x1FFFF), max_size=160
)


@settings(max_examples=int(os.environ.get("TIDEMARK_PROPERTY_EXAMPLES", "300")), deadline=None)
@given(text=_names, lines=st.integers(1, 3), width=st.integers(40, 400))
def test_fit_never_overflows_and_keeps_what_it_shows(text, lines, width):
    shown = graph_layout.fit(text, width=width, px=12, lines=lines)
    assert 1 <= len(shown) <= lines
    assert all(graph_layout.text_width(line, 12) <= width for line in shown)
    joined = "".join(shown)
    if joined.startswith("…") and not text.startswith("…"):
        assert text.endswith(joined[1:]) and len(joined) - 1 < len(text)
    else:
        assert joined == text


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
