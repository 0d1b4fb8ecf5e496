"""The catalog's web sign-in throttle's answer (django-axes, configured in settings as
``AXES_*``): the sign-in page again, saying why and for how long."""

from __future__ import annotations

import math

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def sign_in_locked_out(
    request: HttpRequest, original_response: HttpResponse | None, credentials: dict | None
) -> HttpResponse:
    """``AXES_LOCKOUT_CALLABLE``: a sign-in refused because its username or its client
    address has failed too often (``TIDEMARK_LOGIN_FAILURES``), answered 429 with
    ``Retry-After`` the whole window (seconds: the most it can take to clear), the form
    keeping the username typed."""
    window = int(settings.AXES_COOLOFF_TIME.total_seconds())
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    form = AuthenticationForm(request, initial={"username": username[:150]})
    context = {
        "form": form,
        "next": request.POST.get("next", ""),
        "locked_out_minutes": math.ceil(window / 60),
    }
    response = render(request, "registration/login.html", context, status=429)
    response["Retry-After"] = str(window)
    return response
