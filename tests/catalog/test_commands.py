import pytest
from django.core.management import CommandError, call_command

from catalog.keys import parse_key
from catalog.models import ApiKey, Team

pytestmark = pytest.mark.django_db


def test_create_team_then_api_key_prints_a_working_key_once(capsys, client):
    call_command("create_team", "orders", name="Orders platform")
    assert Team.objects.get(slug="orders").name == "Orders platform"
    call_command("create_api_key", "orders", scopes="read")
    token = capsys.readouterr().out.strip().splitlines()[-1]
    assert parse_key(token) is not None
    assert ApiKey.objects.get().scopes == ["read"]
    response = client.get("/api/v1/me", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.json()["team"]["slug"] == "orders"


def test_create_team_with_paging_routing_key_sets_the_on_call_channel():
    call_command("create_team", "orders", name="Orders", paging_routing_key="0123456789abcdef" * 2)
    assert Team.objects.get(slug="orders").paging_routing_key == "0123456789abcdef" * 2


@pytest.mark.parametrize("key", ["abc", "0123456789abcdef" * 2 + "0", "0123-456789abcdef" * 2])
def test_create_team_refuses_what_is_not_a_pagerduty_routing_key(key):
    with pytest.raises(CommandError) as refused:
        call_command("create_team", "orders", name="Orders", paging_routing_key=key)
    message = str(refused.value)
    assert message.startswith("paging_routing_key: ")
    assert repr(key) in message and "32" in message and "pagerduty_routing_key" in message
    assert not Team.objects.exists()


def test_create_team_twice_is_a_clear_error():
    call_command("create_team", "orders", name="Orders")
    with pytest.raises(CommandError, match="slug"):
        call_command("create_team", "orders", name="Orders again")


def test_create_api_key_for_unknown_team_fails():
    with pytest.raises(CommandError, match="no team"):
        call_command("create_api_key", "ghosts")


def test_create_api_key_rejects_unknown_scope():
    call_command("create_team", "orders", name="Orders")
    with pytest.raises(CommandError, match="unknown scope"):
        call_command("create_api_key", "orders", scopes="read,admin")


def test_load_demo_refuses_a_configured_database():
    with pytest.raises(CommandError, match="embedded"):
        call_command("load_demo")
    assert not Team.objects.exists()


@pytest.mark.parametrize("days", ["0", "-1", "100000000"])
def test_create_api_key_rejects_expiry_out_of_range(days):
    call_command("create_team", "orders", name="Orders")
    with pytest.raises(CommandError, match="between 1 and 3650"):
        call_command("create_api_key", "orders", "--expires-in-days", days)
    assert not ApiKey.objects.exists()
