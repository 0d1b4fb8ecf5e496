"""The shell examples of the README's Try it, the Walkthrough page, the Producer guide's
Declarations as code, Change notices and Restatements and the Consumer guide's
Notifications, run as written against a ``make run`` stack: they must not drift."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

from .helpers import REPO_ROOT, embedded_env

README_URL = "http://127.0.0.1:8000"
README_WATCHDOG_URL = "http://127.0.0.1:8001"
README_KEY_FILE = "var/demo-api-key"
MARK = "=== tidemark-walkthrough block {} ==="


# (file, section) whose shell blocks run, in this order, in one shell; a section of None
# is the whole page.
SECTIONS = (
    ("README.md", "Try it"),
    ("docs/walkthrough.md", None),
    ("docs/guides/producer.md", "Declarations as code"),
    ("docs/guides/producer.md", "Change notices"),
    ("docs/guides/producer.md", "Restatements"),
    ("docs/guides/consumer.md", "Notifications"),
)
# The Producer guide's example file, which its commands read as catalog.yaml.
CATALOG_FILE = "catalog.yaml"


def _section(name: str, title: str | None) -> str:
    """The text of ``name``'s ``## title`` section (the whole page for None): up to the
    next heading of its level or above, or the end; a ``#`` line inside a fenced block
    (a comment in a code example) is no heading."""
    text = (REPO_ROOT / name).read_text()
    if title is None:
        return text
    lines, found, fenced = [], False, False
    for line in text.splitlines(keepends=True):
        if not fenced and re.match(r"#{1,2} ", line):
            if found:
                break
            found = line.rstrip("\n") == f"## {title}"
            continue
        fenced ^= line.startswith("```")
        if found:
            lines.append(line)
    assert found, f"{name} has no '## {title}' section"
    return "".join(lines)


def _walkthrough_blocks() -> list[str]:
    blocks = []
    for name, title in SECTIONS:
        text = _section(name, title)
        found = re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S)
        assert found, f"{name} {title or ''}: no shell examples"
        blocks += found
    return blocks


def _json_values(text: str) -> list:
    """Every JSON value in ``text``, in order (curl -s prints bodies back to back)."""
    decoder, values, pos = json.JSONDecoder(), [], 0
    while (pos := _skip_space(text, pos)) < len(text):
        value, pos = decoder.raw_decode(text, pos)
        values.append(value)
    return values


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _block_with(blocks: list[str], outputs: list[str], needle: str) -> list:
    found = [out for block, out in zip(blocks, outputs, strict=True) if needle in block]
    assert len(found) == 1, f"expected one Walkthrough block containing {needle!r}"
    return _json_values(found[0])


def test_readme_walkthrough_runs_against_make_run(embedded_stack):
    blocks = _walkthrough_blocks()
    assert len(blocks) >= 7, blocks
    assert README_KEY_FILE in blocks[0]  # the README's Try it starts from make run's key
    assert all(
        README_URL in block
        or README_KEY_FILE in block
        or README_WATCHDOG_URL in block
        or "manage.py" in block
        or "$PING" in block
        for block in blocks[1:]
    ), blocks
    key_file = shlex.quote(str(embedded_stack.var_dir / "demo-api-key"))
    lake = shlex.quote(str(embedded_stack.var_dir / "lake"))
    declarations = _section("docs/guides/producer.md", "Declarations as code")
    [declared] = re.findall(r"^```yaml\n(.*?)^```", declarations, re.M | re.S)
    catalog_file = embedded_stack.var_dir / CATALOG_FILE
    catalog_file.write_text(declared)
    script = ["set -eo pipefail"]
    for number, block in enumerate(blocks):
        block = block.replace(README_URL, embedded_stack.url).replace(README_KEY_FILE, key_file)
        block = block.replace(README_WATCHDOG_URL, embedded_stack.watchdog_url)
        block = block.replace("var/lake", lake)
        block = block.replace(CATALOG_FILE, shlex.quote(str(catalog_file)))
        script += [block, "echo", f"echo '{MARK.format(number)}'"]
    script.append('printf "%s" "$KEY"')
    # python3 in the README is any Python 3; the project's own keeps the test host-free.
    # manage.py in the README must reach this stack's files, as it reaches var/ by default.
    env = {
        **embedded_env(embedded_stack.var_dir),
        "PATH": f"{REPO_ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }

    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        # The script took 81 s on a 2-core machine at a load average of 6 (60 s ran out).
        timeout=120,
    )

    report = f"exit {result.returncode}\n--- stdout ---\n{result.stdout}\n--- stderr ---\n"
    report += result.stderr
    assert result.returncode == 0, report
    *outputs, key = re.split(r"\n?=== tidemark-walkthrough block \d+ ===\n", result.stdout)
    assert len(outputs) == len(blocks), report
    assert key == embedded_stack.key, report

    [listed] = _json_values(outputs[0])  # the README's Try it: the demo's datasets
    assert "raw/orders" in {d["name"] for d in listed["results"]}, report

    registered = _block_with(blocks, outputs, '"sla_cron": "30 6 * * *"')
    assert len(registered) == 1 and "id" in registered[0], report
    assert registered[0]["name"] == "curated/orders_daily", report

    subscribed = _block_with(blocks, outputs, "https://hooks.example.com/tidemark")
    assert len(subscribed) == 1, report
    assert subscribed[0]["endpoint_url"] == "https://hooks.example.com/tidemark", report
    assert subscribed[0]["newest_only"] is False, report

    [dashboard] = _block_with(blocks, outputs, '"newest_only": true')
    assert dashboard["endpoint_url"].startswith("https://dashboards.example.com/"), report
    assert (dashboard["dataset"]["name"], dashboard["newest_only"]) == ("raw/orders", True)

    [close] = _block_with(blocks, outputs, '"need_by_cron": "0 6 * * *"')
    assert close["need_by_cron"] == "0 6 * * *", report
    assert [w["code"] for w in close["warnings"]] == ["need_by_before_sla"], report
    [standby] = _block_with(blocks, outputs, "standby.example.com")
    assert standby["url"] == "https://standby.example.com/hooks/tidemark", report
    assert (standby["subscription_id"], standby["caught_up"]) == (close["id"], 0), report
    assert standby["endpoint_secret"].startswith("whsec_"), report

    published = _block_with(blocks, outputs, "Idempotency-Key:")
    assert [p["state"] for p in published] == ["ready"], report

    restated = _block_with(blocks, outputs, '"rerun-2"')
    assert [r["current_version"] for r in restated] == ["rerun-2"], report

    latest, ready_list = _block_with(blocks, outputs, "/$ID/partitions/latest")
    assert latest["key"] == "2026-11-28", report
    assert latest["current_revision"]["version"] == "rerun-2", report
    assert [p["key"] for p in ready_list["results"]] == ["2026-11-28"], report

    claimed = _block_with(blocks, outputs, '"pattern": "airflow://orders"')
    assert [(c["kind"], c["pattern"]) for c in claimed] == [
        ("job_namespace", "airflow://orders")
    ], report
    [received] = _block_with(blocks, outputs, '"eventType": "COMPLETE"')
    assert (received["kind"], received["verified"], received["problems"]) == (
        "run",
        True,
        [],
    ), report
    [processed] = [o for b, o in zip(blocks, outputs, strict=True) if "process_lineage" in b]
    assert processed.startswith("lineage events: "), report
    runs, undeclared = _block_with(blocks, outputs, "/reports/undeclared-reads")
    assert [(r["state"], r["ended_at"]) for r in runs["results"]] == [
        ("complete", "2026-11-29T05:40:00Z")
    ], report
    # The demo key sees every team's rows (governance scope): the demo's own are there too.
    [read] = [r for r in undeclared["results"] if r["team"] == "orders"]
    assert (read["team"], read["job"]["name"], read["runs"], read["verified"]) == (
        "orders",
        "orders_daily.build",
        1,
        True,
    ), report
    assert read["dataset"]["name"] == "finance.public.daily_revenue", report
    assert read["dataset"]["owner"] == "finance", report

    problem = _block_with(blocks, outputs, "28.11.2026")
    assert len(problem) == 1 and problem[0]["status"] == 400, report
    assert [e["field"] for e in problem[0]["errors"]] == ["partition"], report

    clicks = _block_with(blocks, outputs, '"storage_source": "local"')
    assert len(clicks) == 1 and clicks[0]["name"] == "raw/clicks", report
    latest_click, poll = _block_with(blocks, outputs, "/poll")
    assert latest_click["key"] == "2026-11-28", report
    assert latest_click["current_revision"]["detected_by"] == "poll", report
    assert poll["polled"] is True and poll["group_prefix"] == "raw/clicks/", report
    # The sweep by hand listed (a later narrow sweep with nothing due would list nothing).
    assert max(s["list_calls"] for s in poll["recent_sweeps"]) >= 1, report

    too_soon = _block_with(blocks, outputs, "$(in_days 3)")
    assert len(too_soon) == 1 and too_soon[0]["status"] == 422, report
    assert too_soon[0]["code"] == "notice_period_too_short", report
    assert too_soon[0]["earliest_effective_at"] in too_soon[0]["detail"], report

    acknowledged, notice = _block_with(blocks, outputs, "/acknowledgements")
    assert acknowledged["team"] == "analytics", report
    assert [a["team"] for a in notice["acknowledgements"]] == ["analytics"], report
    assert notice["pending_acknowledgements"] == [] and notice["state"] == "announced", report
    assert notice["schema_diff"]["changed"]["order_total"][1] == "DECIMAL(12,2)", report

    [applied] = _block_with(blocks, outputs, "/apply-early")
    assert (applied["id"], applied["state"]) == (notice["id"], "effective"), report
    assert applied["applied_early"] is True, report

    enabled, recovered, attempts, too_old = _block_with(blocks, outputs, "/recover")
    assert enabled["is_active"] is True and recovered["queued"] >= 0, report
    assert recovered["remaining"] == 0, report
    assert {a["outcome"] for a in attempts["results"]} <= {"retry", "rejected", "gone"}, report
    assert (too_old["status"], too_old["code"]) == (422, "recover_since_out_of_range"), report
    assert [e["field"] for e in too_old["errors"]] == ["since"], report

    [emergency] = _block_with(blocks, outputs, '"emergency": true')
    assert (emergency["emergency"], emergency["kind"]) == (True, "location_move"), report
    assert emergency["override_reason"].startswith("the storage provider"), report

    [sunset] = _block_with(blocks, outputs, '"sunset_at"')
    assert (sunset["status"], sunset["code"]) == (422, "sunset_too_soon"), report

    *schema_publishes, unannounced = _block_with(blocks, outputs, "/unannounced-changes")
    assert [p["partition"] for p in schema_publishes] == ["2026-11-29", "2026-11-30"], report
    [change] = unannounced["results"]
    assert (change["removed"], change["source"]) == (["customer_id"], "readiness"), report
    assert change["dataset"]["name"] == "curated/orders_daily", report

    [(_, declaration_out)] = [
        (b, o) for b, o in zip(blocks, outputs, strict=True) if "apply_catalog" in b
    ]
    dry_run, applied_file = declaration_out.split("dry run: nothing changed", 1)
    assert "+ s3://lake/forecast/demand (create)" in dry_run, report
    [applied_again] = _json_values(applied_file[applied_file.index("{") :])
    assert applied_again["dry_run"] is False and applied_again["changed"] is False, report
    assert [d["action"] for d in applied_again["datasets"]] == ["unchanged"] * 3, report

    week = _block_with(blocks, outputs, '"version": "v1"')
    assert [p["current_version"] for p in week] == ["v1"] * 7, report
    staged = _block_with(blocks, outputs, "\"restatement\": '$RESTATEMENT'")
    assert [(p["version"], p["current_version"]) for p in staged] == [("v2", "v1")] * 7, report
    progress, promoted, partitions = _block_with(blocks, outputs, "/promote")
    assert (progress["state"], progress["partitions_ready"]) == ("staged", 7), report
    assert (promoted["state"], promoted["partitions_total"]) == ("promoted", 7), report
    assert {p["current_revision"]["version"] for p in partitions["results"]} == {"v2"}, report
    assert len(partitions["results"]) == 7, report

    [pinged] = [out for block, out in zip(blocks, outputs, strict=True) if "$PING?" in block]
    assert pinged.startswith("OK"), report  # the ping's tiny text answer, then the list
    # The demo's critical dataset has its own monitors, made by the catalog.
    [monitor] = [m for m in _json_values(pinged[2:])[0] if m["name"] == "orders daily"]
    assert (monitor["name"], monitor["state"]) == ("orders daily", "up"), report
    assert monitor["last_partition"] == "2026-11-28", report
    assert monitor["ping_url"].startswith(embedded_stack.watchdog_url), report

    # The Consumer guide: the demo's analytics team's newest dead letter and its endpoint.
    dead, replayed, endpoints, replayed_all, rotated, paced = _block_with(
        blocks, outputs, "/rotate-secret"
    )
    assert (dead["state"], dead["attempts"]) == ("dead", 15), report
    assert (replayed["id"], replayed["state"]) == (dead["id"], "pending"), report
    [failing] = [e for e in endpoints["results"] if e["id"] == dead["endpoint_id"]]
    assert failing["kind"] == "webhook" and failing["failing_since"], report
    assert replayed_all["replayed"] >= 1, report
    assert rotated["endpoint_secret"].startswith("whsec_"), report
    assert rotated["previous_secret_expires_at"], report
    assert (paced["id"], paced["rate_limit_per_second"]) == (failing["id"], 2), report
