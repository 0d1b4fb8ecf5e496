"""The committed OpenAPI document (docs/openapi.yaml) matches the code.

Regenerate with: .venv/bin/python manage.py spectacular --file docs/openapi.yaml
"""

from pathlib import Path

from django.core.management import call_command

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.yaml"


def test_committed_openapi_document_is_current(tmp_path):
    generated = tmp_path / "openapi.yaml"
    call_command("spectacular", "--file", str(generated), "--validate", "--fail-on-warn")
    assert generated.read_text() == COMMITTED.read_text(), (
        "docs/openapi.yaml is stale: run manage.py spectacular --file docs/openapi.yaml"
    )
