"""The dataset page's audit trail shows only the fields that changed and apply to the entry
(``catalog.web.audit``): the rules on recorded changes, then the page for entries written by
the real services (a registration, a change notice's announcement, an owner's edit)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from catalog import change_notices
from catalog.actors import Actor
from catalog.models import AuditEntry
from catalog.services import datasets
from catalog.web.audit import ShownChange, action_words, shown_changes, words

NOW = datetime(2026, 11, 28, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("changes", "shown"),
    [
        # A change of a set value is shown, old and new.
        ({"criticality": ["medium", "high"]}, [ShownChange("criticality", "medium", "high")]),
        # Equal, or blank on both sides (none, "", [], {}, false): nothing changed.
        ({"lifecycle": ["active", "active"]}, []),
        ({"override_reason": [None, ""]}, []),
        ({"emergency": [None, False]}, []),
        ({"tags": [[], None]}, []),
        # Set for the first time: the new value alone; cleared: no new value.
        ({"kind": [None, "deprecation"]}, [ShownChange("kind", None, "deprecation")]),
        (
            {"sunset_at": ["2026-12-30T09:19:12.370141Z", None]},
            [ShownChange("sunset_at", "2026-12-30 09:19 UTC", None)],
        ),
        ({"emergency": [True, False]}, [ShownChange("emergency", "yes", "no")]),
        # A value set for the first time that does not apply to the entry's other values.
        (
            {"completion_signal": [None, "event"], "success_marker": [None, "_SUCCESS"]},
            [ShownChange("completion_signal", None, "event")],
        ),
        (
            {"completion_signal": [None, "success_marker"], "success_marker": [None, "_DONE"]},
            [
                ShownChange("completion_signal", None, "success_marker"),
                ShownChange("success_marker", None, "_DONE"),
            ],
        ),
        (
            {"sla_cron": [None, ""], "sla_timezone": [None, "UTC"], "sla_grace_seconds": [None, 0]},
            [],
        ),
        (
            {"sla_cron": [None, "0 6 * * *"], "sla_grace_seconds": [None, 1800]},
            [
                ShownChange("sla_cron", None, "0 6 * * *"),
                ShownChange("sla_grace_seconds", None, "30 min"),
            ],
        ),
        (
            {"partitioning": [None, "none"], "partition_timezone": [None, "UTC"]},
            [ShownChange("partitioning", None, "none")],
        ),
        # A changed value is shown even where it does not apply: someone changed it.
        (
            {"success_marker": ["_SUCCESS", "_DONE"], "completion_signal": ["event", "event"]},
            [ShownChange("success_marker", "_SUCCESS", "_DONE")],
        ),
        # Whatever is not [old, new] is shown as a new value.
        ({"note": "moved"}, [ShownChange("note", None, "moved")]),
        (
            {"range": [None, ["2026-11-01", "2026-11-03"]]},
            [ShownChange("range", None, "2026-11-01, 2026-11-03")],
        ),
    ],
)
def test_shown_changes_keep_what_changed_and_applies(changes, shown):
    assert shown_changes(changes) == shown


@pytest.mark.parametrize(
    ("field", "value", "text"),
    [
        ("effective_at", "2026-12-30T09:19:12.370141Z", "2026-12-30 09:19 UTC"),
        ("effective_at", "2026-12-30T10:19:00+01:00", "2026-12-30 10:19 UTC"),
        ("description", "2026-12-30 is the day", "2026-12-30 is the day"),
        ("sla_grace_seconds", 5400, "1 h 30 min"),
        ("change_notice_days", 0, "0"),
        ("emergency", True, "yes"),
    ],
)
def test_words(field, value, text):
    assert words(field, value) == text


def test_action_words():
    assert action_words("change_notice.announced") == "change notice announced"


# --- the page ---------------------------------------------------------------------------------


def _audit_rows(body: str) -> list[str]:
    section = body.split("<h2>Audit trail</h2>")[1].split("<tbody>")[1]
    rows = re.findall(r"<tr>(.*?)</tr>", section, re.S)
    return [re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", row)).strip() for row in rows]


@time_machine.travel(NOW, tick=False)
def test_the_dataset_page_shows_only_the_fields_that_apply(make_person, client_as, orders):
    actor = Actor(team=orders, username="olga")
    dataset = datasets.dataset_register(
        actor=actor, namespace="s3://lake", name="curated/orders_daily", criticality="high"
    )
    change_notices.change_notice_announce(
        actor=actor,
        dataset=dataset,
        kind="breaking_schema_change",
        description="amount becomes a decimal",
        effective_at=NOW + timedelta(days=30),
        now=NOW,
    )
    datasets.dataset_update(actor=actor, dataset=dataset, criticality="critical")
    entries = {entry.action: entry.changes for entry in AuditEntry.objects.filter(dataset=dataset)}
    # What the services record (unchanged here): whole records, with what does not apply.
    assert entries["dataset.registered"]["success_marker"] == [None, "_SUCCESS"]
    assert entries["change_notice.announced"]["emergency"] == [None, False]

    body = client_as(make_person("olga", orders)).get(f"/datasets/{dataset.pk}/").content.decode()
    updated, announced, registered = _audit_rows(body)
    assert "dataset updated" in updated and "criticality high → critical" in updated
    assert "change notice announced" in announced
    assert "kind breaking_schema_change" in announced
    assert "effective_at 2026-12-28 09:00 UTC" in announced
    assert "emergency" not in announced and "override_reason" not in announced
    assert "dataset registered" in registered
    assert "completion_signal event" in registered and "criticality high" in registered
    for absent in ("success_marker", "manifest_name", "location_template", "sla_timezone"):
        assert absent not in registered
    assert "—" not in announced + registered and "None" not in announced + registered
