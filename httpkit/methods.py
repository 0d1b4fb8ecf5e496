"""Web addresses that only take a form's submission (POST): a button's action such as
"revoke this key". Opened any other way (a bookmark, the address bar after a refused save,
a reload), Django's ``require_POST`` answers a blank 405; ``post_only`` answers a page in
the area's layout saying what the address does and linking to the page whose button sends
it, so a person is never left on an empty page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

TEMPLATE = "httpkit/method_not_allowed.html"

# The view's URL parameters -> (the address of the page whose button sends the form, a
# label for it, e.g. "the team's page"). It may only reverse URLs: no database.
BackLink = Callable[..., tuple[str, str]]


def post_only(
    *,
    what: str,
    back: BackLink,
    layout: str = "httpkit/page.html",
    headers: Mapping[str, str] | None = None,
) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Decorate a view that takes only POST, like ``require_POST``, but answer any other
    method with a 405 page (``Allow: POST``) rather than a blank one.

    Args:
        what: what the form does, as the start of a sentence ("Revoking an API key").
        back: called with the view's URL keyword arguments; returns the address of the
            page holding the form and its label (see ``BackLink``).
        layout: the template the page extends (the area's own, for its navigation);
            ``httpkit/page.html`` by default, the layout every area shares.
        headers: added to the 405 response (e.g. the on-call pages' security headers).
    """

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method == "POST":
                return view(request, *args, **kwargs)
            back_url, back_label = back(**kwargs)
            context = {
                "layout": layout,
                "what": what,
                "back_url": back_url,
                "back_label": back_label,
            }
            response = render(request, TEMPLATE, context, status=405)
            response["Allow"] = "POST"
            for name, value in (headers or {}).items():
                response[name] = value
            return response

        return wrapper

    return decorator
