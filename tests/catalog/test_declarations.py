import json
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from catalog import bounded_yaml, declarations, selectors
from catalog.actors import Actor
from catalog.errors import DeclarationForAnotherTeam, LifecycleNoticeRequired
from catalog.models import AuditEntry, Dataset
from catalog.services import datasets
from tests.catalog.factories import DatasetFactory, TeamFactory

DOC = """
team: orders
datasets:
  - namespace: s3://Lake/
    name: raw/orders
    description: Orders as they land
    criticality: high
    sla_cron: "0 6 * * *"
    sla_timezone: Europe/Paris
    change_notice_days: 7
  - namespace: s3://lake
    name: raw/refunds
"""


def test_validate_normalises_identities_and_keeps_only_declared_fields():
    document = declarations.validate(declarations.load(DOC))
    assert document.team == "orders"
    first, second = document.datasets
    assert (first.namespace, first.name) == ("s3://lake", "raw/orders")
    assert first.fields["criticality"] == "high"
    assert second.fields == {}


@pytest.mark.parametrize(
    ("text", "path", "rule"),
    [
        ("team: [", "body", "yaml"),
        ("- 1", "body", "type"),
        ("datasets: []", "team", "required"),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x, sla_grace_seconds: -1}]",
            "datasets[0].sla_grace_seconds",
            "range",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x}, {namespace: s3://l, name: y, "
            "criticality: huge}]",
            "datasets[1].criticality",
            "invalid_choice",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x, slacron: x}]",
            "datasets[0].slacron",
            "unknown",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: has space}]",
            "datasets[0].name",
            "whitespace",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x}, {namespace: s3://l, name: x}]",
            "datasets[1].name",
            "duplicate",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x, sunset_at: 2030-01-01T00:00:00}]",
            "datasets[0].sunset_at",
            "aware_datetime",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x, description: 5}]",
            "datasets[0].description",
            "string",
        ),
        (
            "team: t\ndatasets: [{namespace: s3://l, name: x, accepts_future_partitions: 1}]",
            "datasets[0].accepts_future_partitions",
            "boolean",
        ),
    ],
)
def test_validate_names_the_offending_path(text, path, rule):
    with pytest.raises(declarations.InvalidDeclaration) as caught:
        declarations.validate(declarations.load(text))
    assert (caught.value.errors[0].field, caught.value.errors[0].rule) == (path, rule)


def test_load_refuses_unsafe_tags_and_oversize_documents():
    with pytest.raises(declarations.InvalidDeclaration):
        declarations.load("team: !!python/object/apply:os.system ['true']")
    with pytest.raises(declarations.InvalidDeclaration) as caught:
        declarations.load(b"#" * (declarations.MAX_BYTES + 1))
    assert caught.value.errors[0].rule == "max_bytes"


def _laughs(levels: int) -> str:
    """A "billion laughs" document: each level names the previous one nine times."""
    lines = ['l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [" + ", ".join([f"*l{level - 1}"] * 9) + "]")
    return "\n".join(lines)


def _nested(levels: int, inner: str = "1") -> str:
    return "team: " + "[" * levels + inner + "]" * levels


@pytest.mark.parametrize(
    ("text", "path", "rule"),
    [
        # Nesting: the root mapping is level 0 and no value may be below level 64, as in a
        # JSON body (httpkit.storable): 64 lists under the root put the 1 at level 65.
        (_nested(64), "body", "depth"),
        (_nested(100_000), "body", "depth"),  # never reaches the recursion limit
        ("team:\n" + "- " * 70 + "x", "body", "depth"),
        # An alias deepens the tree where it is used: each level is 8 deep, used 9 times.
        (
            "a: &a [[[[[[[[1]]]]]]]]\nb: &b [*a, *a]\nc: &c [*b]\nd: &d [[[[[[[[*c]]]]]]]]\n"
            "e: &e [[[[[[[[*d]]]]]]]]\nf: &f [[[[[[[[*e]]]]]]]]\ng: &g [[[[[[[[*f]]]]]]]]\n"
            "h: &h [[[[[[[[*g]]]]]]]]\ni: &i [[[[[[[[*h]]]]]]]]\nj: [[[[[[[[*i]]]]]]]]",
            "body",
            "depth",
        ),
        (_laughs(9), "body", "max_values"),  # 9**9 values from 700 bytes
        ("a: &a [1, *a]", "body", "yaml_alias"),
        ("a: &a {b: *a}", "body", "yaml_alias"),
        ("team: *nowhere", "body", "yaml"),
        ('team: "a\\0b"', "team", "text"),
        (
            'team: t\ndatasets: [{namespace: s3://l, name: x, description: "\\ud800"}]',
            "datasets[0].description",
            "text",
        ),
        ('"k\\0": 1', "k\x00", "text"),
        ("team: 2026-13-45", "body", "yaml"),
        ("team: 2026-01-01 00:00:00 +99:00", "body", "yaml"),
        ("team: " + "9" * 5000, "body", "yaml"),
        (b"team: \xff", "body", "encoding"),
    ],
)
def test_load_refuses_what_a_json_body_may_not_hold(text, path, rule):
    with pytest.raises(declarations.InvalidDeclaration) as caught:
        declarations.load(text)
    assert (caught.value.errors[0].field, caught.value.errors[0].rule) == (path, rule)
    assert caught.value.status == 400


def test_load_counts_plain_values_too(monkeypatch):
    monkeypatch.setattr(bounded_yaml, "MAX_VALUES", 1000)  # 50,000 take seconds to compose
    fits = "team: [" + ", ".join(["1"] * 997) + "]"  # the root, a key, the list, 997 items
    assert len(declarations.load(fits)["team"]) == 997
    with pytest.raises(declarations.InvalidDeclaration) as caught:
        declarations.load(fits.replace("[", "[1, "))
    assert caught.value.errors[0].rule == "max_values"


def test_load_takes_what_fits_the_limits_with_aliases_and_merge_keys():
    level, node = 0, declarations.load(_nested(63))
    while isinstance(node, dict | list):
        node = node["team"] if isinstance(node, dict) else node[0]
        level += 1
    assert (level, node) == (64, 1)
    shared = declarations.load(
        "defaults: &d {criticality: high, sla_cron: '0 6 * * *'}\n"
        "team: orders\n"
        "datasets:\n"
        "  - {<<: *d, namespace: s3://lake, name: raw/a}\n"
        "  - {<<: *d, namespace: s3://lake, name: raw/b, criticality: low}\n"
    )
    assert [d["criticality"] for d in shared["datasets"]] == ["high", "low"]
    assert declarations.load(_laughs(4))["l3"][8][8][8][8] == "lol"  # 9**4 values


def test_plan_diffs_fields_and_reports_not_declared():
    document = declarations.validate(declarations.load(DOC))
    current = {
        ("s3://lake", "raw/orders"): {
            **{f: None for f in declarations.FIELDS},
            "description": "Orders as they land",
            "criticality": "low",
            "sla_cron": "0 6 * * *",
            "sla_timezone": "Europe/Paris",
            "change_notice_days": 7,
        }
    }
    plan = declarations.plan(document, current=current, owned=["s3://lake/raw/orders", "s3://x/y"])
    update, create = plan.items
    assert update.action == "update"
    assert [(c.field, c.old, c.new) for c in update.changes] == [("criticality", "low", "high")]
    assert create.action == "create"
    assert plan.not_declared == ("s3://x/y",)


# --- against the catalog ----------------------------------------------------------------


@pytest.fixture
def actor(team):
    return Actor(team=team, username="test")


def _doc(text=DOC):
    return declarations.validate(declarations.load(text))


@pytest.mark.django_db
def test_dry_run_changes_nothing_and_shows_the_plan(actor):
    plan = selectors.declarations_plan(team=actor.team, document=_doc())
    assert [i.action for i in plan.items] == ["create", "create"]
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_apply_creates_then_updates_and_twice_is_a_no_op(actor):
    datasets.declarations_apply(actor=actor, document=_doc())
    orders = Dataset.objects.get(name="raw/orders")
    assert (orders.owner, orders.criticality, orders.change_notice_days) == (actor.team, "high", 7)
    assert Dataset.objects.filter(name="raw/refunds").exists()

    again = datasets.declarations_apply(actor=actor, document=_doc())
    assert {i.action for i in again.items} == {"unchanged"}
    assert AuditEntry.objects.filter(action="dataset.updated").count() == 0

    changed = datasets.declarations_apply(
        actor=actor, document=_doc(DOC.replace("criticality: high", "criticality: low"))
    )
    assert changed.items[0].action == "update"
    orders.refresh_from_db()
    assert orders.criticality == "low"
    entry = AuditEntry.objects.get(action="dataset.updated")
    assert entry.changes == {"criticality": ["high", "low"]}


@pytest.mark.django_db
def test_apply_leaves_undeclared_datasets_alone(actor):
    other = DatasetFactory(owner=actor.team, namespace="s3://lake", name="raw/old")
    plan = datasets.declarations_apply(actor=actor, document=_doc())
    assert plan.not_declared == ("s3://lake/raw/old",)
    assert Dataset.objects.filter(pk=other.pk).exists()


@pytest.mark.django_db
def test_a_lifecycle_change_without_its_notice_refuses_the_whole_apply(actor):
    DatasetFactory(owner=actor.team, namespace="s3://lake", name="raw/refunds")
    text = DOC + "    lifecycle: deprecated\n    sunset_at: 2099-01-01T00:00:00Z\n"
    with pytest.raises(LifecycleNoticeRequired) as caught:
        datasets.declarations_apply(actor=actor, document=_doc(text))
    assert "datasets[1]" in caught.value.detail
    assert caught.value.errors[0].field == "datasets[1].lifecycle"
    assert not Dataset.objects.filter(name="raw/orders").exists()  # all or nothing
    assert Dataset.objects.get(name="raw/refunds").lifecycle == "active"


@pytest.mark.django_db
def test_a_refused_lifecycle_change_advises_what_a_declarations_file_can_do(actor):
    refunds = DatasetFactory(owner=actor.team, namespace="s3://lake", name="raw/refunds")
    text = DOC + "    lifecycle: deprecated\n    sunset_at: 2099-01-01T00:00:00Z\n"
    with pytest.raises(LifecycleNoticeRequired) as caught:
        datasets.declarations_apply(actor=actor, document=_doc(text))
    detail = caught.value.detail
    assert "give an override_reason" not in detail  # a file cannot carry one
    assert f"POST /api/v1/datasets/{refunds.pk}/change-notices" in detail
    assert "apply the file again once it has taken effect" in detail
    assert f"PATCH /api/v1/datasets/{refunds.pk} with an override_reason" in detail


@pytest.mark.django_db
def test_a_new_dataset_declared_deprecated_is_told_to_start_active(actor):
    text = DOC.replace(
        "    change_notice_days: 7\n",
        "    change_notice_days: 7\n    lifecycle: deprecated\n"
        "    sunset_at: 2099-01-01T00:00:00Z\n",
    )
    with pytest.raises(LifecycleNoticeRequired) as caught:
        datasets.declarations_apply(actor=actor, document=_doc(text))
    detail = caught.value.detail
    assert "give an override_reason" not in detail and "/api/v1/datasets/" not in detail
    assert "declare it active first" in detail
    assert not Dataset.objects.exists()


@pytest.mark.django_db
def test_apply_catalog_command_gives_the_files_advice(team, tmp_path):
    DatasetFactory(owner=team, namespace="s3://lake", name="raw/refunds")
    path = tmp_path / "catalog.yaml"
    path.write_text(DOC + "    lifecycle: retired\n")
    with pytest.raises(CommandError) as refused:
        call_command("apply_catalog", str(path), "--apply")
    message = str(refused.value)
    assert message.startswith("lifecycle_notice_required: datasets[1]")
    assert "give an override_reason" not in message
    assert "apply the file again" in message and "retirement change notice" in message


@pytest.mark.django_db
def test_a_declaration_for_another_team_or_dataset_is_refused(actor):
    with pytest.raises(DeclarationForAnotherTeam):
        datasets.declarations_apply(actor=actor, document=_doc(DOC.replace("orders\n", "x\n", 1)))
    DatasetFactory(owner=TeamFactory(slug="billing"), namespace="s3://lake", name="raw/refunds")
    with pytest.raises(Exception, match=r"datasets\[1\]"):
        datasets.declarations_apply(actor=actor, document=_doc())
    assert not Dataset.objects.filter(name="raw/orders").exists()


@pytest.mark.django_db
def test_apply_catalog_command_is_a_dry_run_unless_asked(team, tmp_path, capsys):
    path = tmp_path / "catalog.yaml"
    path.write_text(DOC)
    call_command("apply_catalog", str(path))
    out = capsys.readouterr().out
    assert "+ s3://lake/raw/orders (create)" in out
    assert "criticality: 'high'" in out
    assert not Dataset.objects.exists()
    call_command("apply_catalog", str(path), "--apply")
    assert Dataset.objects.count() == 2
    call_command("apply_catalog", str(path), "--apply")
    assert "no changes" in capsys.readouterr().out
    with pytest.raises(CommandError, match="declares team"):
        call_command("apply_catalog", str(path), "--team", "billing")


@pytest.mark.django_db
def test_apply_catalog_command_reports_problems_with_their_path(team, tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(DOC.replace('"0 6 * * *"', '"61 * * * *"'))
    with pytest.raises(CommandError, match=r"datasets\[0\]\.sla_cron"):
        call_command("apply_catalog", str(path), "--apply")
    assert not Dataset.objects.exists()


def test_sunset_at_keeps_its_offset():
    document = _doc(DOC + "    sunset_at: 2030-01-01T00:00:00Z\n")
    assert document.datasets[1].fields["sunset_at"] == datetime(2030, 1, 1, tzinfo=UTC)


@pytest.mark.django_db
def test_a_declaration_opts_a_dataset_in_to_future_partitions(actor):
    forecast = DOC.replace("    change_notice_days: 7\n", "    accepts_future_partitions: true\n")
    plan = datasets.declarations_apply(actor=actor, document=_doc(forecast))
    assert ("accepts_future_partitions", None, True) in [
        (c.field, c.old, c.new) for c in plan.items[0].changes
    ]
    assert Dataset.objects.get(name="raw/orders").accepts_future_partitions is True
    assert Dataset.objects.get(name="raw/refunds").accepts_future_partitions is False

    undeclared = forecast.replace("    accepts_future_partitions: true\n", "")
    back = datasets.declarations_apply(actor=actor, document=_doc(undeclared))
    assert back.items[0].action == "unchanged"  # a field the file leaves out stays as it is
    assert Dataset.objects.get(name="raw/orders").accepts_future_partitions is True
    off = datasets.declarations_apply(
        actor=actor,
        document=_doc(
            forecast.replace("accepts_future_partitions: true", "accepts_future_partitions: false")
        ),
    )
    assert [(c.field, c.old, c.new) for c in off.items[0].changes] == [
        ("accepts_future_partitions", True, False)
    ]
    assert AuditEntry.objects.filter(
        action="dataset.updated", changes__accepts_future_partitions=[True, False]
    ).exists()


@pytest.mark.django_db
def test_apply_catalog_dry_run_and_apply_list_each_datasets_cron_warnings(team, tmp_path, capsys):
    path = tmp_path / "catalog.yaml"
    path.write_text(DOC.replace('"0 6 * * *"', '"* 6 * * *"'))
    call_command("apply_catalog", str(path))
    out = capsys.readouterr().out
    assert "! sla_cron: minute is '*' with hour '6'" in out
    assert "(every_minute_of_fixed_hour)" in out
    assert not Dataset.objects.exists()
    call_command("apply_catalog", str(path), "--json")
    body = json.loads(capsys.readouterr().out)
    assert [w["code"] for w in body["datasets"][0]["warnings"]] == ["every_minute_of_fixed_hour"]
    call_command("apply_catalog", str(path), "--apply")
    out = capsys.readouterr().out
    assert "(every_minute_of_fixed_hour)" in out and "applied" in out


@pytest.mark.django_db
def test_apply_catalog_dry_run_refuses_a_cron_that_never_fires(team, tmp_path):
    path = tmp_path / "catalog.yaml"
    path.write_text(DOC.replace('"0 6 * * *"', '"0 6 30 2 *"'))
    with pytest.raises(CommandError, match=r"datasets\[0\]\.sla_cron: never fires"):
        call_command("apply_catalog", str(path))
