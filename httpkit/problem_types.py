"""The pages a problem document's ``type`` points at.

RFC 9457 section 3.1.1: a problem type URI, when dereferenced, should give human-readable
documentation of the type. Every problem document Tidemark sends has ``type:
/problems/<code with dashes>``, so each server (the catalog and the watchdog alone) answers
``/problems/`` with the list of the types it can send and ``/problems/<type>`` with one
type's title, status and what to do about it; HTML for browsers, JSON for programs.

The list is every ``Problem`` subclass imported once the URL configuration is loaded (it
imports every view, and with them every app's errors) plus the types the HTTP glue answers
itself (``GLUE_TYPES``). ``markdown_page`` renders the documentation site's page of every
type both servers can send (``manage.py problem_types --markdown``).
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, dataclass

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.urls import get_resolver
from django.utils.html import format_html, format_html_join

from problems import Problem
from problems.core import TYPE_BASE


@dataclass(frozen=True)
class ProblemType:
    """One problem type: ``code`` (snake_case, its ``type`` is ``/problems/`` plus the code
    with dashes), ``title``, HTTP ``status`` and a ``description`` (may be empty)."""

    code: str
    title: str
    status: int
    description: str = ""

    @property
    def slug(self) -> str:
        return self.code.replace("_", "-")

    @property
    def uri(self) -> str:
        return TYPE_BASE + self.slug


# Types answered by the HTTP glue (Django's handlers, DRF's exceptions, middleware), not
# raised as a Problem subclass.
GLUE_TYPES = (
    ProblemType("not_authenticated", "Authentication required", 401,
                "Send the API key as 'Authorization: Bearer <key>'."),
    ProblemType("authentication_failed", "Authentication failed", 401,
                "The key is malformed, unknown, revoked or expired: create a new one."),
    ProblemType("permission_denied", "Not allowed", 403,
                "The key or person lacks the scope or role this operation needs."),
    ProblemType("csrf_failed", "CSRF check failed", 403,
                "A signed-in form was stale or came from another site: reload it."),
    ProblemType("not_found", "Not found", 404, "Nothing exists at this path."),
    ProblemType("method_not_allowed", "Method not allowed", 405,
                "The path exists; the Allow header lists the methods it takes."),
    ProblemType("not_acceptable", "Not acceptable", 406,
                "Ask for application/json (or leave Accept out)."),
    ProblemType("length_required", "Content-Length required", 411,
                "Send the body with a Content-Length header, not chunked."),
    ProblemType("payload_too_large", "The request body is too large", 413,
                "The detail names the limit; send less, or split the request."),
    ProblemType("unsupported_media_type", "Unsupported media type", 415,
                "Send the body as JSON with 'Content-Type: application/json'; "
                "accepted_media_types lists what the endpoint takes."),
    ProblemType("malformed_request", "The request body could not be parsed", 400,
                "The body is not valid JSON (or YAML where accepted)."),
    ProblemType("bad_request", "Bad request", 400,
                "The request could not be accepted, e.g. a Host header this server does "
                "not serve."),
    ProblemType("throttled", "Too many requests", 429,
                "Wait for the number of seconds in Retry-After, then try again."),
    ProblemType("server_error", "Internal error", 500,
                "A fault of the server, logged there; retrying may not help."),
    ProblemType("database_unavailable", "The database is unavailable", 503,
                "The database is down or failing over; nothing was written. Retry after "
                "the number of seconds in Retry-After."),
)  # fmt: skip


def known_types(*urlconfs: str) -> dict[str, ProblemType]:
    """Every problem type this process can send, by code (sorted).

    Args:
        urlconfs: URL configurations (module paths) whose views are imported first, besides
            the settings' ``ROOT_URLCONF``; ``"config.urls_watchdog"`` adds the types only
            the watchdog's own server sends.
    """
    for urlconf in (None, *urlconfs):
        get_resolver(urlconf).url_patterns  # noqa: B018 - imports every view and its errors
    found: dict[str, ProblemType] = {}
    for cls in _subclasses(Problem):
        if cls.code in found or cls.code == Problem.code:
            continue
        doc = inspect.getdoc(cls) if cls.__doc__ else ""
        found[cls.code] = ProblemType(cls.code, cls.title, cls.status, _first_paragraph(doc))
    for glue in GLUE_TYPES:
        found.setdefault(glue.code, glue)
    return dict(sorted(found.items()))


def _subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *_subclasses(sub)]
    return out


def _first_paragraph(doc: str) -> str:
    return " ".join(doc.split("\n\n")[0].split()) if doc else ""


def _wants_json(request: HttpRequest) -> bool:
    accept = request.headers.get("Accept", "")
    return "json" in accept and "text/html" not in accept


def problem_type_list(request: HttpRequest) -> HttpResponse:
    """``GET /problems/``: every problem type this server can send."""
    types = list(known_types().values())
    if _wants_json(request):
        return JsonResponse({"problem_types": [_as_json(t) for t in types]})
    rows = format_html_join(
        "\n",
        '<tr><td><a href="{}">{}</a></td><td data-label="status">{}</td>'
        '<td data-label="title">{}</td></tr>',
        ((t.uri, t.slug, t.status, t.title) for t in types),
    )
    return _page(
        "Problem types",
        format_html(
            "<p>Every error is an RFC 9457 problem document "
            "(<code>application/problem+json</code>) with <code>type</code>, "
            "<code>title</code>, <code>status</code>, <code>detail</code>, "
            "<code>code</code>, and for input errors <code>errors[]</code> "
            "(<code>field</code>, <code>rule</code>, <code>detail</code>, and "
            "<code>value</code>: the value sent, when it can be shown).</p>"
            "<table><thead><tr><th>type</th><th>status</th><th>title</th></tr></thead>"
            "<tbody>{}</tbody></table>",
            rows,
        ),
    )


def problem_type_detail(request: HttpRequest, slug: str) -> HttpResponse:
    """``GET /problems/<type>``: one problem type.

    Raises:
        Http404: no problem type has this slug.
    """
    problem_type = known_types().get(slug.replace("-", "_"))
    if problem_type is None or problem_type.slug != slug:
        raise Http404(f"no problem type {slug!r}")
    if _wants_json(request):
        return JsonResponse(_as_json(problem_type))
    return _page(
        problem_type.title,
        format_html(
            "<p><code>type: {}</code> &middot; <code>code: {}</code> &middot; HTTP {}</p>"
            '<p>{}</p><p><a href="{}">All problem types</a></p>',
            problem_type.uri,
            problem_type.code,
            problem_type.status,
            description(problem_type),
            TYPE_BASE,
        ),
    )


def description(problem_type: ProblemType) -> str:
    """What the type means and what to do about it: its own description, else a sentence
    that its HTTP status implies."""
    return problem_type.description or _by_status(problem_type.status)


def _by_status(status: int) -> str:
    if status >= 500:
        return "A fault on the server's side; the detail says whether to retry."
    if status == 409:
        return "The request conflicts with the current state; the detail says which."
    if status == 404:
        return "What the request names does not exist (or is not visible to the caller)."
    if status == 403:
        return "The caller may not do this; the detail says why."
    return "The request must change before it can succeed; the detail says how."


def _as_json(problem_type: ProblemType) -> dict:
    return {"type": problem_type.uri, **asdict(problem_type)}


def _page(title: str, body: str) -> HttpResponse:
    """An HTML page in the layout every Tidemark page shares (``httpkit/page.html``)."""
    return HttpResponse(
        render_to_string("httpkit/problem_type.html", {"title": title, "body": body})
    )


MARKDOWN_INTRO = """\
# Problem types

<!-- Generated by `manage.py problem_types --markdown`: do not edit by hand. -->

Every error Tidemark answers is an RFC 9457 problem document
(`application/problem+json`) with `type`, `title`, `status`, `detail` and `code`, and for
input errors `errors[]` (`field`, `rule`, `detail`, and `value`: the value sent at the
field, when it can be shown; see [`validation-error`](#validation-error)). Its `type` is a
relative URI, `/problems/<type>`: the server that sent it answers that path with the page
below (HTML for a browser, JSON for `Accept: application/json`), and `/problems/` lists
every type that server can send. The catalog's server and the watchdog's own each list
their own; this page lists both.
"""


def markdown_page(types: dict[str, ProblemType]) -> str:
    """The documentation site's page of problem types (``docs/reference/problems.md``).

    Args:
        types: the types to list, by code (``known_types("config.urls_watchdog")``).

    Returns:
        Markdown text: a table of every type, then one section per type whose heading is
        the type's slug, so ``problems.md#<slug>`` is its anchor.
    """
    ordered = sorted(types.values(), key=lambda t: t.slug)
    rows = [f"| [`{t.slug}`](#{t.slug}) | {t.status} | {_cell(t.title)} |" for t in ordered]
    sections = [
        f"## {t.slug}\n\n`type: {t.uri}` · `code: {t.code}` · HTTP {t.status}: "
        f"{t.title}\n\n{description(t)}\n"
        for t in ordered
    ]
    table = "| type | status | title |\n|---|---|---|\n" + "\n".join(rows) + "\n"
    return "\n".join([MARKDOWN_INTRO, table, *sections])


def _cell(text: str) -> str:
    return text.replace("|", "\\|")  # a table cell ends at an unescaped pipe
