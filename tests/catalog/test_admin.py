import pytest
from django.contrib.auth.models import User

from tests.catalog.factories import DatasetFactory, EndpointFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "path",
    [
        "team",
        "apikey",
        "dataset",
        "partition",
        "readinessevent",
        "subscription",
        "endpoint",
        "delivery",
        "auditentry",
    ],
)
def test_admin_changelists_render(client, path):
    DatasetFactory()
    EndpointFactory()
    client.force_login(User.objects.create_superuser("op", "op@example.com", "pw"))
    response = client.get(f"/admin/catalog/{path}/", SERVER_NAME="localhost")
    assert response.status_code == 200
    assert b"secret_encrypted" not in response.content and b"digest" not in response.content
