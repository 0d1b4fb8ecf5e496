"""What the demo's producers write into storage: the files of each partition of a polled
dataset, under its storage source (the embedded ``local`` source, ``var/lake``), so the
fallback poll finds in the store what the history says landed there."""

from __future__ import annotations

import json

import objectstore

from .. import storage
from ..models import Dataset


def _filesystem_and_base(dataset: Dataset, key: str):
    source = storage.sources()[dataset.storage_source]
    location = objectstore.parse_template(dataset.location_template, partitioned=True)
    lister = objectstore.Lister(source)
    path = f"{location.parent}{location.segment_for(key)}/{location.inner}".rstrip("/")
    return lister.fs, f"{source.root}/{path}"


def write_partition(
    dataset: Dataset, key: str, *, files: int, expected_files: int | None = None
) -> dict | None:
    """Write ``files`` data files of partition ``key`` and, by the dataset's completion
    signal, its success marker (written last) or its manifest promising
    ``expected_files`` (default ``files``).

    Returns:
        The manifest written, or None for a success-marker dataset.
    """
    fs, base = _filesystem_and_base(dataset, key)
    fs.makedirs(base, exist_ok=True)
    for number in range(files):
        fs.pipe_file(f"{base}/part-{number:04}.json", b'{"demo": true}\n')
    if dataset.completion_signal == Dataset.CompletionSignal.MANIFEST:
        manifest = {"expected_files": expected_files or files, "row_count": 1200 * files}
        fs.pipe_file(f"{base}/{dataset.manifest_name}", json.dumps(manifest).encode())
        return manifest
    fs.pipe_file(f"{base}/{dataset.success_marker}", b"")
    return None


def add_file(dataset: Dataset, key: str, number: int) -> None:
    """Write one more data file of partition ``key`` (the last one of a manifest)."""
    fs, base = _filesystem_and_base(dataset, key)
    fs.pipe_file(f"{base}/part-{number:04}.json", b'{"demo": true}\n')
