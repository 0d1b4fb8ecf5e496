"""The watchdog's own people: operator accounts, their sign-in sessions and the sign-in
throttle, all in the watchdog's database (DESIGN.md, "The watchdog's own people").

Django's ``auth.User`` lives in the catalog's database in the main deployment, so the
on-call pages never use it: passwords are hashed with ``django.contrib.auth.hashers`` and a
session is a random key in a cookie whose digest is an ``OperatorSession`` row.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.hashers import check_password, make_password
from django.db import IntegrityError, transaction
from django.db.models import Case, F, Q, Value, When

from problems import FieldError, ValidationProblem

from . import db
from .models import LoginThrottle, Operator, OperatorSession

# Owner labels are team slugs.
LABEL = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,149}$")
# A session's last_seen_at is written at most this often (not on every page view).
TOUCH_EVERY = timedelta(minutes=5)


def _config() -> dict:
    return settings.WATCHDOG_ONCALL


def normalise_username(username: str) -> str:
    return username.strip().lower()


def operator_create(
    *, username: str, password: str, labels: list[str], all_labels: bool = False
) -> Operator:
    """Create an operator account.

    Args:
        labels: owner labels (team slugs) whose monitors it sees and may pause.
        all_labels: sees every monitor (the operators of Tidemark itself).

    Raises:
        ValidationProblem: a bad username or label, no label and not ``all_labels``, a
            password the configured validators refuse, or a username already taken.
    """
    username = normalise_username(username)
    problems = _account_problems(username, password, labels, all_labels)
    if problems:
        raise ValidationProblem.of("The operator account is not valid.", problems)
    try:
        with transaction.atomic(using=db.alias()):
            return Operator.objects.create(
                username=username,
                password=make_password(password),
                labels=sorted(set(labels)),
                all_labels=all_labels,
            )
    except IntegrityError as exc:
        raise ValidationProblem(
            "The operator account is not valid.",
            errors=[FieldError("username", f"{username!r} is taken", "unique")],
        ) from exc


def operator_update(
    operator: Operator,
    *,
    password: str | None = None,
    labels: list[str] | None = None,
    all_labels: bool | None = None,
    is_active: bool | None = None,
) -> Operator:
    """Change an operator's password, labels or active flag (None leaves one alone). A new
    password or deactivation ends its sessions.

    Raises:
        ValidationProblem: as ``operator_create``.
    """
    new_labels = operator.labels if labels is None else labels
    new_all = operator.all_labels if all_labels is None else all_labels
    problems = _account_problems(operator.username, password, new_labels, new_all)
    if problems:
        raise ValidationProblem.of("The operator account is not valid.", problems)
    operator.labels = sorted(set(new_labels))
    operator.all_labels = new_all
    if password is not None:
        operator.password = make_password(password)
    if is_active is not None:
        operator.is_active = is_active
    with transaction.atomic(using=db.alias()):
        operator.save()
        if password is not None or is_active is False:
            OperatorSession.objects.filter(operator=operator).delete()
    return operator


def validate_labels(labels: list[str], *, all_labels: bool) -> None:
    """Check an operator's labels (team slugs; at least one unless ``all_labels``).

    Raises:
        ValidationProblem: naming the ``labels`` field.
    """
    problems = [p for p in _account_problems("x", None, labels, all_labels) if p.field == "labels"]
    if problems:
        raise ValidationProblem.of("The operator account is not valid.", problems)


def _account_problems(
    username: str, password: str | None, labels: list[str], all_labels: bool
) -> list[FieldError]:
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    problems = []
    if not USERNAME.match(username):
        problems.append(
            FieldError("username", "letters, digits and _ . @ + - only", "username_format")
        )
    bad = [label for label in labels if not LABEL.match(label)]
    if bad:
        problems.append(FieldError("labels", f"not owner labels (team slugs): {bad}", "label"))
    if not labels and not all_labels:
        problems.append(FieldError("labels", "give at least one label, or all", "required"))
    if password is not None:
        try:
            validate_password(password)
        except ValidationError as exc:
            problems.append(FieldError("password", " ".join(exc.messages), "password"))
    return problems


# --- signing in ---------------------------------------------------------------------------


class SignInRefused(Exception):
    """A sign-in refused: ``throttled`` when too many failed recently (429), else bad
    credentials or an inactive account (the same answer for both)."""

    def __init__(self, *, throttled: bool):
        super().__init__("too many failed sign-ins" if throttled else "wrong username or password")
        self.throttled = throttled


@dataclass(frozen=True)
class SignedIn:
    operator: Operator
    session: OperatorSession
    key: str  # the cookie's value; only its digest is stored


def sign_in(*, username: str, password: str, remote_addr: str, now: datetime) -> SignedIn:
    """Check an operator's password and open a session.

    1. Refuse at once while the username or the client address is over its failure limit
       in the current window (``WATCHDOG_ONCALL``), without checking the password.
    2. Check the password (an unknown username costs the same hashing time).
    3. On failure count it against both keys (dropping counts of windows that ended); on
       success clear the username's count, drop sessions that ended unsigned-out and
       open a new one.

    Raises:
        SignInRefused: throttled, or wrong credentials or an inactive account.
    """
    username = normalise_username(username)[:150]
    keys = {
        f"user:{username}": _config()["login_failures_per_user"],
        f"addr:{remote_addr[:64]}": _config()["login_failures_per_addr"],
    }
    window_start = now - timedelta(seconds=_config()["login_window_seconds"])
    over = LoginThrottle.objects.filter(
        key__in=[key for key in keys], window_start__gt=window_start
    ).values_list("key", "failures")
    if any(failures >= keys[key] for key, failures in over):
        raise SignInRefused(throttled=True)

    operator = Operator.objects.filter(username=username).first()
    if operator is None:
        make_password(password)  # the same work as a real check
        ok = False
    else:
        ok = check_password(password, operator.password, setter=_rehasher(operator))
        ok = ok and operator.is_active
    if not ok:
        # Counts of windows that ended are dropped, so guessed names leave no lasting rows.
        LoginThrottle.objects.filter(window_start__lte=window_start).delete()
        for key in keys:
            _count_failure(key, window_start=window_start, now=now)
        raise SignInRefused(throttled=False)

    key = secrets.token_urlsafe(32)
    idle = timedelta(seconds=_config()["idle_seconds"])
    with transaction.atomic(using=db.alias()):
        LoginThrottle.objects.filter(key=f"user:{username}").delete()
        # Sessions that ended without a sign-out (everyone's: a handful of rows).
        OperatorSession.objects.filter(
            Q(expires_at__lte=now) | Q(last_seen_at__lte=now - idle)
        ).delete()
        session = OperatorSession.objects.create(
            operator=operator,
            key_digest=_digest(key),
            created_at=now,
            last_seen_at=now,
            expires_at=now + timedelta(seconds=_config()["max_age_seconds"]),
        )
        Operator.objects.filter(pk=operator.pk).update(last_login_at=now)
    return SignedIn(operator=operator, session=session, key=key)


def _rehasher(operator: Operator):
    def setter(raw_password: str) -> None:
        Operator.objects.filter(pk=operator.pk).update(password=make_password(raw_password))

    return setter


def _count_failure(key: str, *, window_start: datetime, now: datetime) -> None:
    """One more failure for ``key``: a compare-and-set UPDATE that restarts a window that
    ended, or the row's first INSERT."""
    restart = When(window_start__lte=window_start, then=Value(1))
    updated = LoginThrottle.objects.filter(key=key).update(
        failures=Case(restart, default=F("failures") + 1),
        window_start=Case(
            When(window_start__lte=window_start, then=Value(now)), default=F("window_start")
        ),
    )
    if updated:
        return
    try:
        with transaction.atomic(using=db.alias()):
            LoginThrottle.objects.create(key=key, window_start=now, failures=1)
    except IntegrityError:  # another request created it first
        LoginThrottle.objects.filter(key=key).update(failures=F("failures") + 1)


def session_for(key: str, *, now: datetime) -> OperatorSession | None:
    """The live session (with its operator) for a cookie's key, or None: unknown, ended,
    idle too long, past its absolute end, or its operator deactivated. Refreshes
    ``last_seen_at`` at most every ``TOUCH_EVERY``."""
    if not key or len(key) > 128:
        return None
    session = (
        OperatorSession.objects.select_related("operator")
        .filter(key_digest=_digest(key), operator__is_active=True)
        .first()
    )
    if session is None:
        return None
    idle = timedelta(seconds=_config()["idle_seconds"])
    if session.expires_at <= now or session.last_seen_at + idle <= now:
        OperatorSession.objects.filter(pk=session.pk).delete()
        return None
    if now - session.last_seen_at >= TOUCH_EVERY:
        OperatorSession.objects.filter(pk=session.pk).update(last_seen_at=now)
        session.last_seen_at = now
    return session


def sign_out(key: str) -> None:
    """End the session with this cookie key (nothing when there is none)."""
    if key:
        OperatorSession.objects.filter(key_digest=_digest(key)).delete()


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()
