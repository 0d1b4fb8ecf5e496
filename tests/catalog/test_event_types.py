"""The event catalog: one entry per notification type, each schema a valid draft 2020-12
schema that its example satisfies. That the payloads Tidemark builds satisfy them is
checked for every test (``tests/conftest.py``); the last tests here show that check
catching a payload that drifted."""

from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from catalog.event_types import EVENT_TYPES, event_type_get, event_type_names
from catalog.event_types.markdown import markdown_page
from catalog.models import Notification
from tests.event_payload_checks import closed, payload_problems


def test_the_catalog_and_notification_type_name_the_same_types_once_each():
    assert sorted(event_type_names()) == sorted(Notification.Type.values)
    assert len(event_type_names()) == len(set(event_type_names()))


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda e: e.name)
def test_each_schema_is_valid_and_its_example_satisfies_it(event_type):
    Draft202012Validator.check_schema(event_type.schema)
    assert event_type.schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert event_type.schema["properties"]["type"] == {"const": event_type.name}
    assert payload_problems(event_type.name, event_type.example) == []
    assert event_type.description and event_type.audience


def test_published_schemas_stay_open_and_the_tests_close_them():
    schema = event_type_get("partition.ready").schema
    assert "additionalProperties" not in schema["properties"]["data"]
    assert closed(schema)["properties"]["data"]["additionalProperties"] is False
    # Free-form objects (what the producer sent) stay free-form.
    assert (
        "additionalProperties" not in closed(schema)["properties"]["data"]["properties"]["metadata"]
    )


def test_a_payload_with_a_field_missing_mistyped_or_undescribed_is_caught():
    example = event_type_get("partition.ready").example
    data = dict(example["data"])
    del data["backfill"]
    data["missed_event"] = "no"
    data["surprise"] = 1
    problems = payload_problems("partition.ready", {**example, "data": data})
    assert any("'backfill' is a required property" in p for p in problems)
    assert any("/data/missed_event" in p for p in problems)
    assert any("'surprise' was unexpected" in p for p in problems)
    assert payload_problems("partition.exploded", example) == [
        "'partition.exploded' is not in the event catalog"
    ]


def test_a_restated_payload_is_not_a_ready_one():
    """The types differ where it matters: a restatement has no backfill flag and names
    the version it replaced."""
    restated = event_type_get("partition.restated").example
    assert payload_problems("partition.ready", {**restated, "type": "partition.ready"})


def test_the_committed_documentation_page_is_current():
    """docs/reference/event-types.md is generated: manage.py event_types --markdown."""
    committed = Path(__file__).resolve().parents[2] / "docs" / "reference" / "event-types.md"
    assert committed.read_text() == markdown_page(EVENT_TYPES), (
        "docs/reference/event-types.md is stale: run "
        "manage.py event_types --markdown > docs/reference/event-types.md"
    )
