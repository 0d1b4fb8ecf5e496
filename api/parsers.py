"""Request body parsers with their own bounds (the endpoint's, not the API-wide limit)."""

from __future__ import annotations

import io
import zlib

from django.conf import settings
from rest_framework.parsers import BaseParser

from catalog import declarations
from httpkit.parsers import StrictJSONParser
from problems import FieldError, Problem


class PayloadTooLarge(Problem):
    code = "payload_too_large"
    title = "The request body is too large"
    status = 413


class UnsupportedContentEncoding(Problem):
    code = "unsupported_content_encoding"
    title = "The Content-Encoding is not supported"
    status = 415


class MalformedCompressedBody(Problem):
    code = "malformed_request"
    title = "The request body could not be parsed"
    status = 400


class OpenLineageJSONParser(BaseParser):
    """JSON as ``StrictJSONParser`` reads it, bounded by
    ``settings.TIDEMARK_LINEAGE["max_event_bytes"]`` both as sent and, with
    ``Content-Encoding: gzip``, once inflated (an over-size body is refused without
    inflating more than the limit). Other encodings than gzip and identity are 415.

    Reads the raw stream itself, so the API-wide ``DATA_UPLOAD_MAX_MEMORY_SIZE`` does not
    apply to this endpoint (not a ``JSONParser`` subclass: DRF hands those ``request.body``,
    which that limit guards).
    """

    media_type = "application/json"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.TIDEMARK_LINEAGE["max_event_bytes"]
        meta = parser_context["request"].META if parser_context else {}
        encoding = meta.get("HTTP_CONTENT_ENCODING", "").strip().lower()
        if encoding not in ("", "identity", "gzip", "x-gzip"):
            raise UnsupportedContentEncoding(
                f"Content-Encoding {encoding[:40]!r} is not supported; send gzip or none",
                errors=[FieldError("Content-Encoding", "gzip or none", "content_encoding")],
            )
        if _declared_length(meta) > limit:
            raise _too_large(limit, "as sent")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise _too_large(limit, "as sent")
        if encoding in ("gzip", "x-gzip"):
            raw = inflate_gzip(raw, limit)
        return StrictJSONParser().parse(io.BytesIO(raw), media_type, parser_context)


def _declared_length(meta) -> int:
    """The request's ``Content-Length`` (0 when absent or not a number)."""
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def inflate_gzip(data: bytes, limit: int) -> bytes:
    """Inflate a gzip body (every member of it) to at most ``limit`` bytes.

    Raises:
        PayloadTooLarge: it inflates to more than ``limit`` bytes (413; inflating stops
            there, so a small bomb costs at most ``limit`` bytes of memory).
        MalformedCompressedBody: not gzip, or truncated (400).
    """
    out = bytearray()
    rest = data
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            out += inflater.decompress(rest, limit + 1 - len(out))
        except zlib.error as exc:
            raise _malformed(f"the gzip body is malformed ({exc})") from exc
        if len(out) > limit or inflater.unconsumed_tail:
            raise _too_large(limit, "once inflated")
        if not inflater.eof:
            raise _malformed("the gzip body is truncated")
        rest = inflater.unused_data
        if not rest:
            return bytes(out)


def _too_large(limit: int, how: str) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"an OpenLineage event may be at most {limit} bytes {how} "
        "(TIDEMARK_LINEAGE_MAX_EVENT_BYTES)",
        errors=[FieldError("body", f"more than {limit} bytes {how}", "max_bytes")],
        extra={"max_bytes": limit},
    )


def _malformed(detail: str) -> MalformedCompressedBody:
    return MalformedCompressedBody(detail, errors=[FieldError("body", detail, "gzip")])


class DeclarationYAMLParser(BaseParser):
    """A catalog declaration as YAML (``application/yaml``), read with
    ``catalog.declarations.load``: at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes, as a
    JSON body (413 beyond, the declared length refused before reading), then the same
    depth and text rules as JSON, and a bound on what aliases expand to."""

    media_type = "application/yaml"

    def parse(self, stream, media_type=None, parser_context=None):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        declared = _declared_length(parser_context["request"].META if parser_context else {})
        raw = b"" if declared > limit or stream is None else stream.read(limit + 1)
        if declared > limit or len(raw) > limit:
            raise PayloadTooLarge(
                f"a declaration may be at most {limit} bytes (TIDEMARK_MAX_BODY_BYTES)",
                errors=[FieldError("body", f"more than {limit} bytes", "max_bytes")],
                extra={"max_bytes": limit},
            )
        return declarations.load(raw, max_bytes=None)
