"""Object storage as Tidemark sees it: operator-defined sources, location templates
relative to a source's root, and a counting lister over fsspec.

Pure (no Django): the catalog's fallback poll and the watchdog's storage check share it,
each with the sources of its own settings. Sources come only from operators' settings, and
a dataset or monitor names one plus a template relative to its root, so no API caller can
make the server list or read an arbitrary URL or local path. Every filesystem is opened
with its listings cache off: each look sees the store as it is.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import fsspec

PLACEHOLDER = "{partition}"
# One List page: S3's ListObjectsV2 maximum, and what the poll's cost model counts in.
PAGE_SIZE = 1000
MANIFEST_MAX_BYTES = 1024 * 1024
# How long an S3 call may take. s3fs retries a timed-out call 5 times on top of botocore's
# own 5 attempts, 15 s each: a store that accepts connections and never answers would hold
# a sweep (and the solo worker, which also delivers) for over 6 minutes per List call. One
# s3fs attempt and botocore's standard retries (throttling included) stay under a minute.
# A source's ``options["config_kwargs"]`` overrides any of these keys.
S3_CLIENT_CONFIG = {
    "connect_timeout": 5,
    "read_timeout": 15,
    "retries": {"mode": "standard", "total_max_attempts": 3},
}
S3FS_RETRIES = 1
_FORBIDDEN = re.compile(r"[*?\[\]\\\x00-\x1f]")


class StorageError(Exception):
    """The store could not be listed or read (credentials, network, a missing bucket)."""


class TemplateError(ValueError):
    """A location template breaks a rule; the message names it."""


@dataclass(frozen=True)
class Source:
    """An operator-defined storage source.

    Attributes:
        name: the key datasets refer to.
        protocol: fsspec protocol (``s3``, ``file``...), from the allow-list in settings.
        root: path inside the store, without protocol and without a trailing slash
            (``bucket/landing`` for ``s3://bucket/landing``).
        options: fsspec storage options (credentials, ``endpoint_url``...); never shown.
    """

    name: str
    protocol: str
    root: str
    options: dict = field(default_factory=dict, compare=False, repr=False)


def parse_source(
    name: str,
    spec: str | dict,
    *,
    allowed: Iterable[str],
    protocols_setting: str = "TIDEMARK_STORAGE_PROTOCOLS",
) -> Source:
    """One operator-defined source from its settings entry.

    Args:
        name: the key the entry is under.
        spec: ``"PROTOCOL://ROOT"`` or ``{"url": "PROTOCOL://ROOT", "options": {...}}``
            (``options``: fsspec storage options).
        allowed: the protocols operators allow (``["s3", "file"]``).
        protocols_setting: the setting ``allowed`` comes from, named in the error.

    Raises:
        StorageError: the URL is malformed or its protocol is not allowed.
    """
    allowed = set(allowed)
    url = spec["url"] if isinstance(spec, dict) else spec
    options = dict(spec.get("options", {})) if isinstance(spec, dict) else {}
    protocol, sep, rest = url.partition("://")
    if not sep or not rest.strip("/"):
        raise StorageError(f"storage source {name!r}: {url!r} is not a PROTOCOL://ROOT URL")
    if protocol not in allowed:
        raise StorageError(
            f"storage source {name!r}: protocol {protocol!r} is not in "
            f"{protocols_setting} ({', '.join(sorted(allowed))})"
        )
    root = ("/" + rest.strip("/")) if protocol == "file" else rest.strip("/")
    return Source(name=name, protocol=protocol, root=root, options=options)


@dataclass(frozen=True)
class Location:
    """A parsed location template: ``parent`` + ``segment`` (holding the partition key) +
    ``inner``. The poll groups datasets by ``parent`` and lists it with a delimiter.

    For ``sales/orders/dt={partition}/``: parent ``sales/orders/``, segment prefix ``dt=``,
    suffix ``""``, inner ``""``. For ``exports/dt={partition}/orders/`` the inner path is
    ``orders/``. An unpartitioned template (no placeholder) is its own segment.
    """

    parent: str
    segment_prefix: str
    segment_suffix: str
    inner: str
    partitioned: bool

    def key_of(self, segment: str) -> str | None:
        """The partition key a listed segment holds, or None when it is not this dataset's."""
        if not self.partitioned:
            return "" if segment == self.segment_prefix else None
        if (
            len(segment) > len(self.segment_prefix) + len(self.segment_suffix)
            and segment.startswith(self.segment_prefix)
            and segment.endswith(self.segment_suffix)
        ):
            return segment[len(self.segment_prefix) : len(segment) - len(self.segment_suffix)]
        return None

    def segment_for(self, key: str) -> str:
        return f"{self.segment_prefix}{key}{self.segment_suffix}" if self.partitioned else key


def parse_template(template: str, *, partitioned: bool) -> Location:
    """Parse a location template relative to its source's root.

    Rules: a relative POSIX path; no ``.`` or ``..`` segments, empty segments or glob
    characters; ``{partition}`` exactly once when the dataset is partitioned (and never
    otherwise), inside one path segment. A trailing slash is implied.

    Raises:
        TemplateError: naming the rule broken.
    """
    if not template or template.startswith("/") or "://" in template:
        raise TemplateError("must be a path relative to the storage source's root")
    if _FORBIDDEN.search(template):
        raise TemplateError("must not contain glob characters, backslashes or control characters")
    segments = template.rstrip("/").split("/")
    if any(s in ("", ".", "..") for s in segments):
        raise TemplateError("must not contain empty, '.' or '..' path segments")
    holders = [i for i, s in enumerate(segments) if PLACEHOLDER in s]
    stray = template.replace(PLACEHOLDER, "")
    if "{" in stray or "}" in stray:
        raise TemplateError("the only placeholder is {partition}")
    if not partitioned:
        if holders:
            raise TemplateError("an unpartitioned dataset's template has no {partition}")
        parent = "/".join(segments[:-1])
        return Location(
            parent=parent + "/" if parent else "",
            segment_prefix=segments[-1],
            segment_suffix="",
            inner="",
            partitioned=False,
        )
    if len(holders) != 1 or segments[holders[0]].count(PLACEHOLDER) != 1:
        raise TemplateError("must contain {partition} exactly once")
    index = holders[0]
    prefix, _, suffix = segments[index].partition(PLACEHOLDER)
    parent = "/".join(segments[:index])
    inner = "/".join(segments[index + 1 :])
    return Location(
        parent=parent + "/" if parent else "",
        segment_prefix=prefix,
        segment_suffix=suffix,
        inner=inner + "/" if inner else "",
        partitioned=True,
    )


@dataclass
class ListingCounts:
    """What a sweep cost: List calls, pages returned and objects (or prefixes) seen."""

    list_calls: int = 0
    pages: int = 0
    objects: int = 0


@dataclass(frozen=True, order=True)
class StoredObject:
    """An object under a partition prefix: ``name`` relative to that prefix, size in bytes.

    ``etag`` (without quotes; ``""`` when the store gives none, as local files) and
    ``modified`` (aware UTC, None when unknown) are what the store says of this version of
    the object: a rewritten marker has a new one (an empty marker rewritten keeps its S3
    ETag, the MD5 of nothing, but not its time). Neither takes part in comparisons.
    """

    name: str
    size: int
    etag: str = field(default="", compare=False)
    modified: datetime | None = field(default=None, compare=False)


def _modified(value) -> datetime | None:
    """An object's modification time as fsspec backends give it (a POSIX timestamp, a
    datetime or an ISO 8601 string), as an aware UTC datetime; None when absent or odd."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
    return None


def _etag(value) -> str:
    return value.strip('"') if isinstance(value, str) else ""


def _stored(name: str, info: dict) -> StoredObject:
    """A ``StoredObject`` from an fsspec ``info`` dict (``find(detail=True)`` values)."""
    return StoredObject(
        name,
        int(info.get("size") or 0),
        _etag(info.get("ETag") or info.get("etag")),
        _modified(
            info.get("mtime")
            or info.get("LastModified")
            or info.get("last_modified")
            or info.get("updated")
        ),
    )


class Lister:
    """Lists one source, counting every call.

    S3 is listed with ``ListObjectsV2`` directly (delimiter, ``StartAfter`` and 1,000-key
    pages, so the cost is exact and a listing can skip old partitions); any other fsspec
    store with ``ls``/``find``, one call each.
    """

    def __init__(self, source: Source, *, fs=None):
        self.source = source
        self.counts = ListingCounts()
        self._fs = fs

    @property
    def fs(self):
        if self._fs is None:
            options = dict(self.source.options)
            if self.source.protocol == "s3":
                options["config_kwargs"] = {
                    **S3_CLIENT_CONFIG,
                    **(options.get("config_kwargs") or {}),
                }
            try:
                fs = fsspec.filesystem(
                    self.source.protocol,
                    # Instances are cached per process (fsspec drops them after a fork),
                    # so a sweep reuses the S3 client; listings are never cached.
                    use_listings_cache=False,
                    **options,
                )
            except Exception as exc:  # any backend's set-up failure is the operator's to fix
                raise StorageError(f"cannot open {self.source.name!r}: {exc}") from exc
            if self.source.protocol == "s3":
                fs.retries = S3FS_RETRIES  # not a constructor option of s3fs
            self._fs = fs
        return self._fs

    def _path(self, relative: str) -> str:
        return f"{self.source.root}/{relative}" if relative else f"{self.source.root}/"

    def child_prefixes(
        self, parent: str, *, start_after: str | None = None, stop: str | None = None
    ) -> list[str]:
        """Names of the "directories" directly under ``parent`` (relative to the root).

        Args:
            parent: ``""`` or a relative path ending in ``/``.
            start_after: skip names that sort before this one (S3 starts the listing there;
                elsewhere the whole directory is read in one call and filtered).
            stop: on S3, names from this one on (relative to ``parent``) are not wanted:
                no page is requested past it.

        Raises:
            StorageError
        """
        if self.source.protocol == "s3":
            names = [
                p[: -1 if p.endswith("/") else None]
                for p in self._s3_pages(parent, delimiter=True, start_after=start_after, stop=stop)
            ]
        else:
            names = [
                posixpath.basename(entry["name"].rstrip("/"))
                for entry in self._call(
                    self.fs.ls, self._path(parent).rstrip("/"), detail=True, missing=[]
                )
                if entry.get("type") == "directory"
            ]
            self.counts.objects += len(names)
            if start_after is not None:
                names = [n for n in names if n >= start_after]
        return sorted(names)

    def objects(self, prefix: str) -> list[StoredObject]:
        """Every object under ``prefix`` (relative, ending in ``/``), recursively.

        Raises:
            StorageError
        """
        if self.source.protocol == "s3":
            # A key ending in "/" (the prefix's own, named "" here, or a deeper one) is a
            # folder placeholder (the S3 console's "Create folder", Hadoop's "dir/"
            # marker), not a file: it must not count as a data file.
            return [
                StoredObject(*entry)
                for entry in self._s3_pages(prefix, delimiter=False)
                if entry[0] and not entry[0].endswith("/")
            ]
        base = self._path(prefix).rstrip("/")
        found = self._call(self.fs.find, base, detail=True, missing={})
        self.counts.objects += len(found)
        cut = len(base.rstrip("/")) + 1
        return sorted(
            _stored(name[cut:] if name.startswith(base) else name, info)
            for name, info in found.items()
        )

    def flat(
        self, parent: str, *, start_after: str | None = None, stop: str | None = None
    ) -> list[StoredObject]:
        """Every object under ``parent`` after ``start_after``, in key order, listed without a
        delimiter (S3 only): one listing returns the objects of many partitions, markers and
        manifests included, with no listing inside each.

        Args:
            parent: ``""`` or a relative path ending in ``/``; names come back relative to it.
            start_after: a name relative to ``parent``; the listing starts after it.
            stop: names from this one on are not wanted: no page is requested past it.

        Raises:
            StorageError: the store failed, or the source is not S3.
        """
        if self.source.protocol != "s3":
            raise StorageError(f"{self.source.name}: a flat listing needs an S3 source")
        return [
            StoredObject(*entry)
            for entry in self._s3_pages(parent, delimiter=False, start_after=start_after, stop=stop)
            if not entry[0].endswith("/")
        ]

    def read_json(self, relative: str, *, size: int) -> object:
        """Read a small JSON document (a manifest).

        Raises:
            StorageError: unreadable, larger than ``MANIFEST_MAX_BYTES``, or not JSON.
        """
        if size > MANIFEST_MAX_BYTES:
            raise StorageError(f"{relative} is {size} bytes, over {MANIFEST_MAX_BYTES}")
        raw = self._call(self.fs.cat_file, self._path(relative), counted=False)
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise StorageError(f"{relative} is not JSON: {exc}") from exc

    def exists(self, relative: str) -> bool:
        """Whether the object ``relative`` (to the root, e.g. ``sales/dt=2026-11-28/_SUCCESS``)
        exists: one ``HeadObject`` on S3, one ``info`` call elsewhere. Not counted (it lists
        nothing). S3 answers a missing bucket as it does a missing key: False.

        Raises:
            StorageError: the store could not be opened or did not answer (credentials,
                network, timeouts).
        """
        fs = self.fs
        path = self._path(relative)
        try:
            if self.source.protocol == "s3":
                bucket, _, key = path.partition("/")
                fs.call_s3("head_object", Bucket=bucket, Key=key)
                return True
            return fs.info(path).get("type") != "directory"
        except FileNotFoundError:
            return False
        except Exception as exc:
            raise StorageError(f"{self.source.name}: {type(exc).__name__}: {exc}") from exc

    def _call(self, fn, *args, counted: bool = True, missing=None, **kwargs):
        """Call the store; a missing path answers ``missing`` (an empty listing)."""
        if counted:
            self.counts.list_calls += 1
            self.counts.pages += 1
        try:
            return fn(*args, **kwargs)
        except FileNotFoundError as exc:
            if missing is None:
                raise StorageError(f"{self.source.name}: {args[0]} does not exist") from exc
            return missing
        except Exception as exc:
            raise StorageError(f"{self.source.name}: {type(exc).__name__}: {exc}") from exc

    def _s3_pages(
        self,
        relative: str,
        *,
        delimiter: bool,
        start_after: str | None = None,
        stop: str | None = None,
    ) -> Iterator:
        bucket, _, key_root = self._path(relative).partition("/")
        params = {"Bucket": bucket, "Prefix": key_root, "MaxKeys": PAGE_SIZE}
        if delimiter:
            params["Delimiter"] = "/"
        if start_after is not None:
            params["StartAfter"] = key_root + start_after
        self.counts.list_calls += 1
        while True:
            try:
                page = self.fs.call_s3("list_objects_v2", **params)
            except FileNotFoundError as exc:
                # A missing prefix is an empty listing, never an error: only a missing bucket
                # (NoSuchBucket, which s3fs raises as FileNotFoundError) gets here, and that
                # is the operator's to fix, not "nothing landed".
                raise StorageError(
                    f"{self.source.name}: bucket {bucket!r} does not exist ({exc})"
                ) from exc
            except Exception as exc:
                raise StorageError(f"{self.source.name}: {type(exc).__name__}: {exc}") from exc
            self.counts.pages += 1
            if delimiter:
                prefixes = page.get("CommonPrefixes", [])
                self.counts.objects += len(prefixes)
                names = [entry["Prefix"][len(key_root) :] for entry in prefixes]
            else:
                contents = page.get("Contents", [])
                self.counts.objects += len(contents)
                names = [
                    (
                        entry["Key"][len(key_root) :],
                        int(entry.get("Size", 0)),
                        _etag(entry.get("ETag")),
                        _modified(entry.get("LastModified")),
                    )
                    for entry in contents
                ]
            for item in names:
                name = item if delimiter else item[0]
                if stop is not None and name >= stop:
                    return  # past what the caller wants: no further page either
                yield item
            if not page.get("IsTruncated"):
                return
            token = page.get("NextContinuationToken")
            if token:
                params["ContinuationToken"] = token
                params.pop("StartAfter", None)
                continue
            # Some S3-compatible stores truncate without a token: go on after the page's
            # last entry, as ListObjects (v1) does with its last key; past a common prefix
            # ("x/" -> "x0"), so its keys are not rolled up into it a second time.
            keys = [e["Key"] for e in page.get("Contents", [])[-1:]]
            rolled = [e["Prefix"][:-1] + "0" for e in page.get("CommonPrefixes", [])[-1:]]
            if not keys + rolled:
                raise StorageError(
                    f"{self.source.name}: a truncated page with no entries and no "
                    "NextContinuationToken"
                )
            after = max(keys + rolled)
            if params.get("StartAfter") is not None and after <= params["StartAfter"]:
                raise StorageError(f"{self.source.name}: the listing does not advance")
            params["StartAfter"] = after
            params.pop("ContinuationToken", None)
