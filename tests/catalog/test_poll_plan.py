"""Where a sweep's listings start and stop (``poll_plan._runs``), as a property: every name
a listed dataset may hold after its start is inside some listing, and no listing reads
through a page or more of a dataset the sweep does not list."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.poll_plan import Run, _Range, _runs, _successor
from objectstore import PAGE_SIZE

NAMES = st.lists(
    st.text(alphabet="abc_", min_size=1, max_size=4), min_size=1, max_size=12, unique=True
)


def _inside(name: str, run: Run) -> bool:
    return (run.start_after is None or name > run.start_after) and (
        run.stop is None or name < run.stop
    )


@st.composite
def _ranges(draw):
    # Disjoint dataset prefixes, as a dataset-first group has (``t042_``), in name order.
    prefixes = sorted(p + "_" for p in draw(NAMES) if not p.endswith("_"))
    prefixes = [p for p in prefixes if not any(q != p and p.startswith(q) for q in prefixes)]
    ranges = []
    for prefix in prefixes:
        listed = draw(st.booleans())
        start = draw(st.sampled_from([None, prefix + "2026-01-01", prefix + "2026-06-010"]))
        history = draw(st.integers(0, 3 * PAGE_SIZE))
        ranges.append(_Range(prefix, start if listed else None, history, listed))
    return ranges


@settings(max_examples=300, deadline=None)
@given(_ranges(), st.sampled_from([1.0, 2.0, 7.5]))
def test_every_listed_name_is_in_a_run_and_no_run_reads_a_page_of_what_is_skipped(
    ranges, per_entry
):
    runs = _runs(ranges, per_entry)
    assert runs == sorted(runs, key=lambda r: r.start_after or "")
    listed = [r for r in ranges if r.listed]
    assert len(runs) <= len(listed)
    for r in listed:
        # Names of this dataset after its start: the first one after it, and its last.
        first = r.start + "\x00" if r.start else r.prefix
        last = r.prefix + "\U0010ffff"
        for name in (first, last):
            assert any(_inside(name, run) for run in runs), (name, runs)
    for r in ranges:
        if not r.listed and r.history * per_entry >= PAGE_SIZE:
            # A skipped dataset of a page or more is never read through.
            name = r.prefix + "2000-01-01/_SUCCESS"
            assert not any(_inside(name, run) for run in runs), (r, runs)
    # What lies past the last dataset listed is not read.
    if listed:
        assert runs[-1].stop == _successor(listed[-1].prefix)


def test_nothing_listed_means_no_listing():
    skipped = [_Range("a_", None, 5, listed=False), _Range("b_", None, 5, listed=False)]
    assert _runs(skipped, 1.0) == []


def test_small_skipped_datasets_are_read_through_and_large_ones_skipped():
    ranges = [
        _Range("a_", "a_2026-01-01", 0),
        _Range("b_", None, 10, listed=False),  # 10 entries: read through
        _Range("c_", "c_2026-01-01", 3),
        _Range("d_", None, PAGE_SIZE, listed=False),  # a page: a new listing after it
        _Range("e_", "e_2026-01-01", 3),
        _Range("f_", None, 10, listed=False),  # after the last listed: not read
    ]
    # A stop is the first name past a prefix: "c`" follows every "c_..." name.
    assert _runs(ranges, 1.0) == [Run("a_2026-01-01", "c`"), Run("e_2026-01-01", "e`")]
