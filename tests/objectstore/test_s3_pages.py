"""Paging an S3 listing when the store truncates a page without a continuation token (some
S3-compatible stores): the listing goes on after the page's last entry, every name once."""

from __future__ import annotations

from bisect import bisect_right

import pytest

from objectstore import Lister, Source, StorageError

KEYS = sorted(
    [f"landing/t{i}_2026-11-2{d}/part-0.parquet" for i in range(3) for d in (7, 8)]
    + [f"landing/t{i}_2026-11-2{d}/_SUCCESS" for i in range(3) for d in (7, 8)]
    + ["landing/t0_2026-11-27.csv", "other/x"]
)


class TokenlessStore:
    """``list_objects_v2`` honouring Prefix, Delimiter and StartAfter, at most ``per_page``
    entries a page, ``IsTruncated`` set and never a ``NextContinuationToken``."""

    def __init__(self, per_page: int = 2, *, advance: bool = True) -> None:
        self.per_page = per_page
        self.advance = advance
        self.calls: list[dict] = []

    def call_s3(self, method, **params):
        assert method == "list_objects_v2"
        assert "ContinuationToken" not in params
        self.calls.append(params)
        prefix, delimiter = params["Prefix"], params.get("Delimiter")
        start = params.get("StartAfter") if self.advance else None
        i = bisect_right(KEYS, start) if start else 0
        contents, prefixes = [], []
        while i < len(KEYS) and len(contents) + len(prefixes) < self.per_page:
            key = KEYS[i]
            if not key.startswith(prefix):
                i += 1
                continue
            cut = key.find(delimiter, len(prefix)) if delimiter else -1
            if cut >= 0:
                common = key[: cut + 1]
                prefixes.append({"Prefix": common})
                while i < len(KEYS) and KEYS[i].startswith(common):
                    i += 1
                continue
            contents.append({"Key": key, "Size": 1})
            i += 1
        more = any(k.startswith(prefix) for k in KEYS[i:])
        return {"Contents": contents, "CommonPrefixes": prefixes, "IsTruncated": more}


def _lister(store) -> Lister:
    return Lister(Source(name="lake", protocol="s3", root="bucket"), fs=store)


def test_a_flat_listing_goes_on_after_the_last_key_of_a_tokenless_page():
    store = TokenlessStore()
    names = [o.name for o in _lister(store).flat("landing/")]
    expected = [k[len("landing/") :] for k in KEYS if k.startswith("landing/")]
    assert names == expected  # every object once, in order
    assert len(store.calls) == -(-len(expected) // 2)


def test_a_delimiter_listing_goes_on_past_the_last_common_prefix():
    store = TokenlessStore()
    names = _lister(store).child_prefixes("landing/")
    assert names == [f"t{i}_2026-11-2{d}" for i in range(3) for d in (7, 8)]
    # Each next page starts past the common prefix it ended with, not inside it (the
    # first page also held the object t0_2026-11-27.csv, sorting before t0_2026-11-27/).
    assert [c.get("StartAfter") for c in store.calls] == [
        None,
        "landing/t0_2026-11-270",
        "landing/t1_2026-11-270",
        "landing/t2_2026-11-270",
    ]


def test_a_delimiter_page_of_objects_only_goes_on_after_its_last_key():
    store = TokenlessStore(per_page=1)
    assert _lister(store).child_prefixes("landing/") == [
        f"t{i}_2026-11-2{d}" for i in range(3) for d in (7, 8)
    ]
    assert store.calls[1]["StartAfter"] == "landing/t0_2026-11-27.csv"


def test_a_store_that_does_not_advance_is_a_storage_error_not_a_loop():
    with pytest.raises(StorageError, match="does not advance"):
        list(_lister(TokenlessStore(advance=False)).flat("landing/"))
