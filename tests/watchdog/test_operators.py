"""The watchdog's own operator accounts: creation rules, sign-in with its throttle, sessions
(idle and absolute ends, sign-out, deactivation) and the ``create_operator`` command. All
in the watchdog's database."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.hashers import check_password
from django.core.management import CommandError, call_command

from problems import ValidationProblem
from watchdog import operators
from watchdog.models import LoginThrottle, Operator, OperatorSession

pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])

T0 = datetime(2026, 11, 29, 5, 0, tzinfo=UTC)
PASSWORD = "tide-watch-4417"


@pytest.fixture
def alice():
    return operators.operator_create(username="Alice", password=PASSWORD, labels=["orders"])


def _sign_in(username="alice", password=PASSWORD, addr="10.0.0.1", now=T0):
    return operators.sign_in(username=username, password=password, remote_addr=addr, now=now)


def test_operator_create_hashes_the_password_and_normalises_the_username(alice):
    row = Operator.objects.using("watchdog").get()
    assert row.username == "alice"
    assert row.password != PASSWORD and check_password(PASSWORD, row.password)
    assert row.labels == ["orders"] and not row.all_labels
    assert row.may_see("orders") and not row.may_see("billing") and not row.may_see("")


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"username": "bad name", "labels": ["orders"]}, "username"),
        ({"username": "bob", "labels": []}, "labels"),
        ({"username": "bob", "labels": ["Not A Slug"]}, "labels"),
        ({"username": "bob", "labels": ["orders"], "password": "short"}, "password"),
        ({"username": "ALICE", "labels": ["orders"]}, "username"),  # taken
    ],
)
def test_operator_create_refuses_bad_accounts(alice, fields, field):
    with pytest.raises(ValidationProblem) as raised:
        operators.operator_create(**{"password": PASSWORD, **fields})
    assert field in {error.field for error in raised.value.errors}
    assert Operator.objects.count() == 1


def test_an_operator_for_every_label_needs_none():
    operator = operators.operator_create(
        username="ops", password=PASSWORD, labels=[], all_labels=True
    )
    assert operator.may_see("anything") and operator.may_see("")


def test_sign_in_opens_a_session_found_by_its_key_only(alice):
    signed_in = _sign_in(username=" ALICE ")
    assert signed_in.operator == alice
    stored = OperatorSession.objects.get()
    assert stored.key_digest != signed_in.key and signed_in.key not in stored.key_digest
    session = operators.session_for(signed_in.key, now=T0 + timedelta(minutes=1))
    assert session.operator == alice
    assert operators.session_for(signed_in.key + "x", now=T0) is None
    assert operators.session_for("", now=T0) is None
    alice.refresh_from_db()
    assert alice.last_login_at == T0


def test_wrong_password_unknown_user_and_inactive_account_are_refused_alike(alice):
    for username, password in (("alice", "nope"), ("nobody", PASSWORD)):
        with pytest.raises(operators.SignInRefused) as refused:
            _sign_in(username=username, password=password)
        assert not refused.value.throttled
    operators.operator_update(alice, is_active=False)
    with pytest.raises(operators.SignInRefused):
        _sign_in()
    assert not OperatorSession.objects.exists()


def test_sessions_end_when_idle_at_their_absolute_end_and_on_sign_out(alice, settings):
    idle = settings.WATCHDOG_ONCALL["idle_seconds"]
    key = _sign_in().key
    # Seen again before going idle: kept, and the idle clock restarts.
    later = T0 + timedelta(seconds=idle - 60)
    assert operators.session_for(key, now=later) is not None
    assert OperatorSession.objects.get().last_seen_at == later
    assert operators.session_for(key, now=later + timedelta(seconds=idle)) is None
    assert not OperatorSession.objects.exists()

    key = _sign_in().key
    end = T0 + timedelta(seconds=settings.WATCHDOG_ONCALL["max_age_seconds"])
    session = OperatorSession.objects.get()
    OperatorSession.objects.filter(pk=session.pk).update(last_seen_at=end - timedelta(seconds=1))
    assert operators.session_for(key, now=end) is None

    key = _sign_in().key
    operators.sign_out(key)
    assert operators.session_for(key, now=T0) is None


def test_a_new_password_or_deactivation_ends_the_sessions(alice):
    key = _sign_in().key
    operators.operator_update(alice, password="another-long-pass-99")
    assert operators.session_for(key, now=T0) is None
    key = _sign_in(password="another-long-pass-99").key
    operators.operator_update(alice, labels=["orders", "billing"])
    assert operators.session_for(key, now=T0) is not None  # labels only: kept
    Operator.objects.filter(pk=alice.pk).update(is_active=False)
    assert operators.session_for(key, now=T0) is None


def test_sign_in_is_throttled_per_username_then_allowed_after_the_window(alice, settings):
    settings.WATCHDOG_ONCALL = {**settings.WATCHDOG_ONCALL, "login_failures_per_user": 3}
    for _ in range(3):
        with pytest.raises(operators.SignInRefused) as refused:
            _sign_in(password="wrong")
        assert not refused.value.throttled
    # Even the right password is refused now, from any address.
    with pytest.raises(operators.SignInRefused) as refused:
        _sign_in(addr="10.9.9.9")
    assert refused.value.throttled
    assert LoginThrottle.objects.get(key="user:alice").failures == 3

    after = T0 + timedelta(seconds=settings.WATCHDOG_ONCALL["login_window_seconds"] + 1)
    _sign_in(now=after)
    assert not LoginThrottle.objects.filter(key="user:alice").exists()  # cleared on success


def test_sign_in_is_throttled_per_address_across_usernames(alice, settings):
    settings.WATCHDOG_ONCALL = {**settings.WATCHDOG_ONCALL, "login_failures_per_addr": 4}
    for number in range(4):
        with pytest.raises(operators.SignInRefused):
            _sign_in(username=f"guess{number}", password="x", addr="203.0.113.7")
    with pytest.raises(operators.SignInRefused) as refused:
        _sign_in(addr="203.0.113.7")
    assert refused.value.throttled
    assert _sign_in(addr="10.0.0.2").operator == alice  # another address is not blocked


def test_a_failure_after_the_window_restarts_the_count(alice):
    with pytest.raises(operators.SignInRefused):
        _sign_in(password="wrong")
    later = T0 + timedelta(hours=1)
    with pytest.raises(operators.SignInRefused):
        _sign_in(password="wrong", now=later)
    row = LoginThrottle.objects.get(key="user:alice")
    assert (row.failures, row.window_start) == (1, later)


# --- the command ----------------------------------------------------------------------------


def test_create_operator_reads_the_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("WATCHDOG_OPERATOR_PASSWORD", PASSWORD)
    out = io.StringIO()
    call_command("create_operator", "bob", "--label", "orders", "--label", "billing", stdout=out)
    assert out.getvalue().strip() == "operator bob (billing, orders)"
    bob = Operator.objects.get(username="bob")
    assert check_password(PASSWORD, bob.password)

    call_command("create_operator", "ops", "--all", stdout=out)
    assert Operator.objects.get(username="ops").all_labels


def test_create_operator_reads_the_password_from_standard_input(monkeypatch):
    monkeypatch.delenv("WATCHDOG_OPERATOR_PASSWORD", raising=False)
    monkeypatch.setattr("sys.stdin", io.StringIO(PASSWORD + "\n"))
    call_command("create_operator", "carol", "--label", "orders", stdout=io.StringIO())
    assert check_password(PASSWORD, Operator.objects.get(username="carol").password)


def test_create_operator_refuses_bad_input_and_updates_only_with_update(monkeypatch, alice):
    monkeypatch.setenv("WATCHDOG_OPERATOR_PASSWORD", "another-long-pass-99")
    with pytest.raises(CommandError, match="username: 'alice' is taken"):
        call_command("create_operator", "alice", "--label", "orders")
    with pytest.raises(CommandError, match="labels"):
        call_command("create_operator", "dave")
    call_command("create_operator", "alice", "--update", stdout=io.StringIO())
    alice.refresh_from_db()
    assert check_password("another-long-pass-99", alice.password)
    assert alice.labels == ["orders"]  # kept: none given
    call_command("create_operator", "alice", "--update", "--label", "billing", stdout=io.StringIO())
    alice.refresh_from_db()
    assert alice.labels == ["billing"]


def test_ended_sessions_and_throttle_counts_are_dropped_not_kept(alice):
    bob = operators.operator_create(username="bob", password=PASSWORD, labels=["billing"])
    operators.sign_in(username="bob", password=PASSWORD, remote_addr="10.0.0.5", now=T0)
    with pytest.raises(operators.SignInRefused):
        _sign_in(username="guessed", password="x", now=T0)
    assert LoginThrottle.objects.count() == 2

    # A day later: bob's session went idle and the guesses' window ended.
    later = T0 + timedelta(days=1)
    with pytest.raises(operators.SignInRefused):
        _sign_in(username="other", password="x", addr="10.0.0.9", now=later)
    assert set(LoginThrottle.objects.values_list("key", flat=True)) == {
        "user:other",
        "addr:10.0.0.9",
    }
    _sign_in(now=later)
    assert list(OperatorSession.objects.values_list("operator", flat=True)) == [alice.pk]
    assert bob.sessions.count() == 0
