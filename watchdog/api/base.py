"""The watchdog API's base view and the problems its views raise."""

from __future__ import annotations

from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.views import APIView

from httpkit.exceptions import problem_exception_handler
from problems import NotFound, Problem

from ..auth import TokenAuthentication
from ..models import Monitor
from ..openapi import WatchdogAutoSchema


class WatchdogApiView(APIView):
    """Base view: the watchdog's own auth and error format, whatever the host settings."""

    authentication_classes = [TokenAuthentication]
    permission_classes = [IsAuthenticated]
    schema = WatchdogAutoSchema()
    pagination_class = None  # lists are plain arrays (at most 500 items)

    def get_exception_handler(self):
        return problem_exception_handler


class TooEarly(Problem):
    status = 425
    code = "monitor_not_provisioned"
    title = "The monitor does not exist yet"


class PingProblem(Problem):
    """The ping URLs' refusals, for the API ping: a partition of another format (400),
    a partition whose period has not started (422: ``rule`` ``partition_started``,
    ``partition``, ``starts_at``, ``newest_accepted_partition``, ``clock_skew_seconds``),
    or over the monitor's rate (429)."""

    code = "ping_rejected"
    title = "The ping was not accepted"

    def __init__(self, detail: str, *, status: int, extra: dict | None = None):
        super().__init__(detail, extra=extra)
        self.status = status


def monitor_or_404(monitor_id: int) -> Monitor:
    """The monitor with primary key ``monitor_id``; raises NotFound (404) without one."""
    monitor = Monitor.objects.filter(pk=monitor_id).first()
    if monitor is None:
        raise NotFound(f"no monitor {monitor_id}")
    return monitor


def caller_label(request: Request) -> str:
    """Who made an API call, as a monitor's ``paused_by`` names it."""
    return f"API token {request.auth.name}" if request.auth is not None else "API"
