"""The example Prometheus alert rules and Grafana dashboard under ``deploy/`` (no promtool in
CI): the rules parse as Prometheus rule groups, the dashboard as Grafana panels, and every
metric their expressions name is one the catalog's or the watchdog's ``/metrics`` exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from django.test import Client, override_settings

from tests.metrics_helpers import family_names

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "tidemark-alerts.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "tidemark-dashboard.json"

# Prometheus's duration syntax (one or more units, largest first).
DURATION = re.compile(r"^((\d+)y)?((\d+)w)?((\d+)d)?((\d+)h)?((\d+)m)?((\d+)s)?((\d+)ms)?$")
METRIC = re.compile(r"\b(tidemark_[a-z0-9_]+)\b")
# Series Prometheus makes itself for every target.
PROMETHEUS_OWN = {"up"}
JOBS = {"tidemark", "tidemark-watchdog"}


pytestmark = pytest.mark.django_db(databases=["default", "watchdog"])


@pytest.fixture
def exposed() -> set[str]:
    """Every sample name the catalog's and the watchdog's /metrics can hold."""
    names: set[str] = set()
    for urls in ("config.urls", "config.urls_watchdog"):
        with override_settings(ROOT_URLCONF=urls):
            response = Client().get("/metrics")
        assert response.status_code == 200
        names |= family_names(response.content.decode())
    return names


def _check_expression(expr: str, exposed: set[str], where: str) -> None:
    assert expr.count("(") == expr.count(")"), f"{where}: unbalanced parentheses"
    assert expr.count("{") == expr.count("}"), f"{where}: unbalanced braces"
    named = set(METRIC.findall(expr))
    assert named or re.match(r"^up\{", expr), f"{where}: names no metric it knows: {expr}"
    unknown = named - exposed
    assert not unknown, f"{where}: not exposed by /metrics: {sorted(unknown)}"
    for job in re.findall(r'job="([^"]*)"', expr):
        assert job in JOBS, f"{where}: job {job!r} is not one of the documented jobs"
    # Only Prometheus's own series may be named besides Tidemark's.
    words = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s*(?:\{|\[|$|\s*[=!<>]=?\s*\d)", expr))
    others = {w for w in words if not w.startswith("tidemark_")} - PROMETHEUS_OWN
    functions_and_labels = {
        "rate", "increase", "delta", "sum", "max", "min", "by", "histogram_quantile",
        "job", "work", "state", "route", "status", "le", "team", "channel", "result",
        "kind", "outcome", "queue", "reason", "system",
    }  # fmt: skip
    assert others <= functions_and_labels, f"{where}: unknown names {sorted(others)}"


def test_the_alert_rules_parse_as_prometheus_rule_groups(exposed):
    document = yaml.safe_load(RULES.read_text())
    assert set(document) == {"groups"}
    groups = document["groups"]
    assert groups and len({g["name"] for g in groups}) == len(groups)
    alerts = []
    for group in groups:
        assert set(group) <= {"name", "interval", "limit", "rules"}, group.keys()
        assert isinstance(group["name"], str) and group["rules"]
        for rule in group["rules"]:
            assert set(rule) <= {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
            assert re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", rule["alert"]), rule["alert"]
            assert isinstance(rule["expr"], str)
            if "for" in rule:
                assert DURATION.match(rule["for"]) and rule["for"], rule["for"]
            assert rule["labels"]["severity"] in {"page", "warning", "info"}
            assert all(isinstance(v, str) for v in rule["labels"].values())
            assert {"summary", "description"} <= set(rule["annotations"])
            assert all(isinstance(v, str) for v in rule["annotations"].values())
            _check_expression(rule["expr"], exposed, rule["alert"])
            alerts.append(rule["alert"])
    assert len(set(alerts)) == len(alerts), "alert names repeat"


def _panels(panels: list[dict]):
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def test_the_dashboard_is_grafana_json_whose_queries_name_exposed_metrics(exposed):
    dashboard = json.loads(DASHBOARD.read_text())
    assert {"title", "uid", "panels", "schemaVersion", "templating"} <= set(dashboard)
    [datasource] = dashboard["templating"]["list"]
    assert (datasource["type"], datasource["query"]) == ("datasource", "prometheus")
    panels = list(_panels(dashboard["panels"]))
    ids = [p["id"] for p in panels]
    assert len(set(ids)) == len(ids), "panel ids repeat"
    queries = 0
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}"
        assert panel["targets"], panel["title"]
        ref_ids = [t["refId"] for t in panel["targets"]]
        assert len(set(ref_ids)) == len(ref_ids), panel["title"]
        for target in panel["targets"]:
            _check_expression(target["expr"], exposed, panel["title"])
            queries += 1
    assert queries >= 20


def test_the_examples_cover_every_family_tidemark_exposes(exposed):
    """A metric added to /metrics is shown on the dashboard (or the test says which)."""
    dashboard = DASHBOARD.read_text()
    families = {name for name in exposed if name.startswith("tidemark_")}
    shown = set(METRIC.findall(dashboard))
    base = {re.sub(r"_(total|created|bucket|count|sum)$", "", n) for n in shown}
    missing = sorted(
        n
        for n in families
        if n not in shown
        and re.sub(r"_(total|created|bucket|count|sum)$", "", n) not in base
        and not n.endswith("_created")
    )
    assert not missing, f"exposed but on no dashboard panel: {missing}"
