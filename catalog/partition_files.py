"""Judging one partition's files: whether what lies under its location is complete, by
its dataset's completion signal (a success marker, or a manifest and the data files it
names). Shared by the fallback poll's sweeps and its pass over recent markers
(``rewritten_markers``).
"""

from __future__ import annotations

from dataclasses import dataclass

import objectstore

from .models import Dataset


@dataclass(frozen=True)
class Verdict:
    """What the files of one partition say.

    ``complete`` partitions are recorded ready. An incomplete one with a readable manifest
    is recorded as pending with ``found`` (so the API says why it is not ready).
    """

    complete: bool
    reason: str
    manifest: dict | None = None
    found: dict | None = None


def signal_name(dataset: Dataset) -> str:
    """The object whose presence (success marker) or content (manifest) completes a
    partition of ``dataset``, relative to the partition's location."""
    if dataset.completion_signal == Dataset.CompletionSignal.SUCCESS_MARKER:
        return dataset.success_marker
    return dataset.manifest_name


def _is_data_file(name: str, dataset: Dataset) -> bool:
    # Hadoop/Spark convention: a path with any part starting with "_" or "." is bookkeeping
    # ("_SUCCESS", a job's leftover "_temporary/0/...", ".spark-staging-*/..."), not data.
    signals = (dataset.success_marker, dataset.manifest_name)
    parts = name.split("/")
    return (
        name not in signals
        and parts[-1] not in signals
        and not any(part.startswith(("_", ".")) for part in parts)
    )


def judge(dataset: Dataset, objects: list[objectstore.StoredObject], read_manifest) -> Verdict:
    """Decide whether a partition is complete from the objects under its location.

    Args:
        objects: everything under the partition's location, names relative to it.
        read_manifest: ``callable(name, size) -> object`` reading the manifest JSON.

    Rules (DESIGN.md, Manifest): a success-marker partition is complete when the marker
    exists. A manifest partition is complete when ``_manifest.json`` (``manifest_name``)
    exists and the data files present match it: every file it names (with its size, when
    given), or else exactly ``expected_files`` data files.
    """
    names = {o.name: o.size for o in objects}
    data = {n: s for n, s in names.items() if _is_data_file(n, dataset)}
    if dataset.completion_signal == Dataset.CompletionSignal.SUCCESS_MARKER:
        if dataset.success_marker in names:
            return Verdict(True, f"{dataset.success_marker} present", found={"files": len(data)})
        return Verdict(False, f"no {dataset.success_marker} yet")
    if dataset.manifest_name not in names:
        return Verdict(False, f"no {dataset.manifest_name} yet")
    try:
        manifest = read_manifest(dataset.manifest_name, names[dataset.manifest_name])
    except objectstore.StorageError as exc:
        return Verdict(False, f"manifest unreadable: {exc}", found={"files": len(data)})
    expected, listed, problem = _manifest_rule(manifest)
    if problem:
        return Verdict(False, problem, found={"files": len(data)})
    found = {"files": len(data), "expected_files": expected}
    if listed is not None:
        missing = sorted(
            n
            for n, size in listed.items()
            if n not in data or (size is not None and data[n] != size)
        )
        found["missing"] = missing[:20]
        if missing:
            reason = f"{len(listed) - len(missing)} of {len(listed)} listed files present"
            return Verdict(False, reason, manifest, found)
        return Verdict(True, f"all {len(listed)} listed files present", manifest, found)
    if len(data) != expected:
        reason = f"{len(data)} of {expected} expected files present"
        return Verdict(False, reason, manifest, found)
    return Verdict(True, f"{expected} of {expected} expected files present", manifest, found)


def _manifest_rule(manifest: object) -> tuple[int | None, dict | None, str | None]:
    """``(expected_files, {name: size or None} or None, problem)`` from a manifest."""
    if not isinstance(manifest, dict):
        return None, None, "manifest is not a JSON object"
    expected = manifest.get("expected_files")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
        return None, None, "manifest.expected_files must be a non-negative integer"
    files = manifest.get("files")
    if files is None:
        return expected, None, None
    if not isinstance(files, list):
        return None, None, "manifest.files must be a list"
    listed: dict = {}
    for entry in files:
        if isinstance(entry, str):
            listed[entry] = None
        elif isinstance(entry, dict) and isinstance(entry.get("name") or entry.get("path"), str):
            size = entry.get("size")
            listed[entry.get("name") or entry.get("path")] = size if isinstance(size, int) else None
        else:
            return None, None, "manifest.files entries must be names or {name, size} objects"
    return expected, listed, None
