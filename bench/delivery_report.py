"""The delivery benchmark's report (``delivery.py``): its targets, the summary and
verdicts over the runs, and the tables it prints."""

from __future__ import annotations

import argparse
import statistics
from typing import Any

TARGET_P50_MS = 300.0
TARGET_P99_MS = 1000.0
TARGET_RATE = 20.0  # publishes/s in the latency run (x subscribers deliveries/s)
TARGET_PER_WORKER = 200.0  # deliveries/s per worker process, receiver answering at once
TARGET_SLOW_PER_WORKER = 500.0  # deliveries/s per worker process, receiver answering in 50 ms
TARGET_SLOW_RECEIVER_MS = 50.0
TARGET_HANG_P99_MS = 1000.0  # p99 of the other endpoints while one hangs until the timeout
# A latency round is "clean" when other processes used at most --quiet-cores CPUs on average
# and at most this many over any 3 s of it (a 2-CPU machine saturates beyond).
QUIET_MAX_3S = 0.5


def _pg(per: dict[str, float]) -> float:
    """PostgreSQL CPU per unit: live backends plus backends that exited in the window."""
    return per["postgres"] + per.get("postgres_exited", 0.0)


def print_table(report: dict[str, Any]) -> None:
    settings, s = report["settings"], report["summary"]
    width = 112
    print()
    print(f"{'run':<50} {'deliv/s':>8} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7}", end="")
    print(f" {'worker':>7} {'pg':>6} {'recv':>6} {'foreign':>7}")
    print(f"{'':<50} {'':>8} {'':>7} {'':>7} {'':>7} {'CPU ms per delivery':>21} {'cores':>7}")
    print("-" * width)

    def row(label, rate, cpu, worker, p50="", p90="", p99=""):
        per = cpu["cpu_ms_per_delivery"]
        print(
            f"{label:<50} {rate:>8} {p50:>7} {p90:>7} {p99:>7} {worker:>7.3f} "
            f"{_pg(per):>6.3f} {per['receiver']:>6.3f} {cpu['cores_used']['foreign']:>7.2f}"
        )

    for lat in report["latency_rounds"]:
        st = lat["latency"]
        row(
            f"latency #{lat['round']}: {settings['rate']:g}/s x {settings['subscribers']} "
            "subscribers",
            lat["deliveries"]["rate_in_window"],
            lat["cpu"],
            lat["cpu"]["cpu_ms_per_delivery"]["worker"],
            st.get("p50_ms", ""),
            st.get("p90_ms", ""),
            st.get("p99_ms", ""),
        )
    for lat in report.get("hang_rounds", []):
        st = lat["latency"]
        row(
            f"hang #{lat['round']}: {lat['hung_endpoint']['path']} hangs, the other "
            f"{settings['subscribers'] - 1}",
            lat["deliveries"]["rate_in_window"],
            lat["cpu"],
            lat["cpu"]["cpu_ms_per_delivery"]["worker"],
            st.get("p50_ms", ""),
            st.get("p90_ms", ""),
            st.get("p99_ms", ""),
        )
    for r in [*report["throughput"], *report["slow_receiver"]]:
        delay = f", receiver +{r['receiver_delay_ms']:g} ms" if r["receiver_delay_ms"] else ""
        row(
            f"throughput {r['label']}: {r['backlog']['deliveries']} due, 1 worker{delay}",
            r["deliveries_per_s"],
            r["cpu"],
            r["cpu"]["cpu_ms_per_delivery"]["worker"],
        )
    for r in report["inprocess"]:
        row(
            f"in-process {r['label']}",
            r["deliveries_per_s"],
            r["cpu"],
            r["pass_cpu_ms_per_delivery"],
        )
    print("-" * width)
    print(
        "worker: the Celery worker process (in-process rows: this process's pass); pg: backends "
        "of the bench databases, exited ones included"
    )
    inexact = [
        name
        for name, cpu in (
            *((f"latency #{r['round']}", r["cpu"]) for r in report["latency_rounds"]),
            *((f"throughput {r['label']}", r["cpu"]) for r in report["throughput"]),
        )
        if not cpu["pg_sessions_opened"]["postgres_exited_is_exact"]
    ]
    if inexact:
        print(
            "  (other databases opened sessions during: "
            + ", ".join(inexact)
            + "; their exited backends inflate pg there)"
        )
    print()
    for lat in report["latency_rounds"]:
        print(f"latency #{lat['round']} by 5 s of publishing (p50 ms / max due / CPUs):", end="")
        for label, bucket in lat["timeline_by_5s"].items():
            print(
                f"  {label} {bucket['latency_p50_ms']} / {bucket['due_max']} / worker "
                f"{bucket['worker_cores']} foreign {bucket['foreign_cores']}",
                end=";",
            )
        print()
    v = s["verdict"]
    print(
        f"latency p50 {s['latency_p50_ms']} ms (target <= {TARGET_P50_MS:g}): "
        f"{'met' if v['p50_met'] else 'MISSED'};  p99 {s['latency_p99_ms']} ms "
        f"(target <= {TARGET_P99_MS:g}): {'met' if v['p99_met'] else 'MISSED'};  at "
        f"{s['achieved_publish_rate']} publishes/s (target {TARGET_RATE:g}): "
        f"{'met' if v['rate_met'] else 'MISSED'}"
    )
    print(f"  basis: {s['basis']}")
    for r in s["latency_rounds"]:
        print(
            f"  latency #{r['round']}: p50 {r['p50_ms']} ms, p99 {r['p99_ms']} ms, most due "
            f"{r['max_due']}; other processes {r['foreign_cores_mean']} CPUs on average, "
            f"{r['foreign_cores_max_3s']} at most over 3 s: "
            + ("clean" if r["clean"] else "NOT clean")
        )
    print(
        f"deliveries/s per worker process (median of {len(report['throughput'])} rounds): "
        f"{s['deliveries_per_s_per_worker']} (target >= {TARGET_PER_WORKER:g}): "
        f"{'met' if v['per_worker_met'] else 'MISSED'}"
    )
    for slow in s["slow_receiver"]:
        print(
            f"deliveries/s per worker process, receiver +{slow['receiver_ms']:g} ms: "
            f"{slow['deliveries_per_s']} (limit concurrency / latency: {slow['limit_per_s']}/s"
            + (
                f"; target >= {TARGET_SLOW_PER_WORKER:g}: "
                + ("met" if slow["target_met"] else "MISSED")
                if slow["target_met"] is not None
                else ""
            )
            + ")"
        )
    if s["hang"]["rounds"]:
        print(
            f"one endpoint hanging until the timeout: the others' p99 {s['hang']['p99_ms']} ms, "
            f"p50 {s['hang']['p50_ms']} ms (target p99 <= {TARGET_HANG_P99_MS:g}): "
            f"{'met' if v['hang_p99_met'] else 'MISSED'}; the hung endpoint got "
            f"{s['hang']['hung_requests']} requests"
        )
    bd = s["latency_breakdown_p50_ms"]
    print(
        "latency p50 by segment: publish -> outbox row "
        f"{bd['publish_to_outbox']} ms, outbox row -> send {bd['outbox_to_attempt']} ms, "
        f"send -> arrival {bd['attempt_to_arrival']} ms; database sessions opened per "
        f"publish: {s['database_sessions_per_publish']}"
    )
    print(
        f"signatures verified: {s['signatures_verified']} of {s['signatures_checked']} checked "
        f"({s['signatures_failed']} failed); duplicates {s['duplicates']}; missing {s['missing']}"
    )
    phases = s.get("phases")
    if phases:
        print("in-process pass, per delivery:")
        for name, ph in phases["per_phase"].items():
            print(
                f"  {name:<10} {ph['wall_ms_per_delivery']:>6.3f} ms wall, "
                f"{ph['python_cpu_ms_per_delivery']:.3f} ms python CPU, "
                f"{ph['statements_per_delivery']:.2f} statements "
                f"({ph['statement_wall_ms_per_delivery']:.3f} ms), "
                f"{ph['commits_per_delivery']:.2f} commits "
                f"({ph['commit_wall_ms_per_delivery']:.3f} ms)"
            )
        print(f"  round trips per delivery: {phases['round_trips_per_delivery']}")
    if report.get("reconnect"):
        rc = report["reconnect"]
        new, reused = rc["new_connection"], rc["reused_connection"]
        print(
            f"one-publish pass ({rc['deliveries_per_pass']} deliveries) on a new / reused "
            f"database connection: {new['wall_ms_median']} / {reused['wall_ms_median']} ms wall, "
            f"{new['client_cpu_ms_mean']} / {reused['client_cpu_ms_mean']} ms client CPU, "
            f"{new['backend_cpu_ms_mean']} / {reused['backend_cpu_ms_mean']} ms backend CPU"
        )
    if s["machine_was_busy"]:
        print(
            f"WARNING: other processes used more than {settings['quiet_cores']} CPUs during "
            "some runs; rates and latencies are pessimistic (CPU ms per delivery are not)"
        )


def _median_or_none(values) -> float | None:
    present = [v for v in values if v is not None]
    return round(statistics.median(present), 1) if present else None


def timeline_by_5s(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    buckets: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        buckets.setdefault(int(max(0.0, r["t_s"] - 0.01) // 5) * 5, []).append(r)
    out = {}
    for start, rs in sorted(buckets.items()):
        p50s = [r["latency_p50_ms"] for r in rs if r["latency_p50_ms"] is not None]
        out[f"{start}-{start + 5}s"] = {
            "latency_p50_ms": round(statistics.median(p50s), 1) if p50s else None,
            "due_max": max(r["due"] for r in rs),
            "worker_cores": round(statistics.fmean(r["cores"]["worker"] for r in rs), 2),
            "foreign_cores": round(statistics.fmean(r["cores"]["foreign"] for r in rs), 2),
        }
    return out


def summarise(report: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    lats = report["latency_rounds"]
    rounds = report["throughput"]
    rates = [r["deliveries_per_s"] for r in rounds]
    per_worker = round(statistics.median(rates), 1)
    drains = [*rounds, *report["slow_receiver"]]
    sigs = [*(r["signatures"] for r in lats), *(r["signatures"] for r in drains)]
    runs_cpu = [*(r["cpu"] for r in lats), *(r["cpu"] for r in drains)]
    runs_cpu += [r["cpu"] for r in report["inprocess"]]
    missing = sum(r["deliveries"]["missing"] for r in lats)

    def med(values) -> float | None:
        values = list(values)
        return round(statistics.median(values), 3) if values else None  # no latency rounds

    clean = [r for r in lats if r["quiet"]["clean"]]
    basis = clean or lats

    def lat_med(key: str, rounds: list[dict[str, Any]]) -> float | None:
        values = [r["latency"][key] for r in rounds if key in r["latency"]]
        return round(statistics.median(values), 1) if values else None

    p50, p99 = lat_med("p50_ms", basis), lat_med("p99_ms", basis)
    hangs = report.get("hang_rounds", [])
    hang_p99 = lat_med("p99_ms", hangs)
    delivery = report["settings"]["delivery_settings"]
    in_flight = min(
        delivery.get("concurrency", 1),
        report["settings"]["subscribers"] * delivery.get("endpoint_concurrency", 1),
    )
    slow_runs = [
        {
            "receiver_ms": r["receiver_delay_ms"],
            "deliveries_per_s": r["deliveries_per_s"],
            "limit_per_s": round(in_flight / (r["receiver_delay_ms"] / 1000), 1),
            "target_met": r["deliveries_per_s"] >= TARGET_SLOW_PER_WORKER
            if r["receiver_delay_ms"] == TARGET_SLOW_RECEIVER_MS
            else None,
        }
        for r in report["slow_receiver"]
        if r["receiver_delay_ms"]
    ]
    achieved = med(r["publishes"]["achieved_rate"] or 0.0 for r in lats)
    summary = {
        "basis": (
            f"latency: median over the {len(clean)} clean latency round(s) of {len(lats)} "
            f"(other processes <= {args.quiet_cores} CPUs on average, <= {QUIET_MAX_3S} over "
            "any 3 s)"
            if clean
            else f"latency: median over all {len(lats)} rounds (none was clean)"
        )
        + "; deliveries/s: median over throughput rounds",
        "latency_p50_ms": p50,
        "latency_p90_ms": lat_med("p90_ms", basis),
        "latency_p99_ms": p99,
        "latency_p99_ms_worst_clean": max(
            (r["latency"]["p99_ms"] for r in clean if "p99_ms" in r["latency"]), default=None
        ),
        "latency_all_rounds_median": {
            "p50_ms": lat_med("p50_ms", lats),
            "p99_ms": lat_med("p99_ms", lats),
        },
        "latency_p99_ms_worst": max(
            (r["latency"]["p99_ms"] for r in lats if "p99_ms" in r["latency"]), default=None
        ),
        "latency_rounds": [
            {
                "round": r["round"],
                "p50_ms": r["latency"].get("p50_ms"),
                "p99_ms": r["latency"].get("p99_ms"),
                "max_due": max((row["due"] for row in r["timeline"]), default=None),
                **r["quiet"],
            }
            for r in lats
        ],
        "clean_latency_rounds": len(clean),
        "latency_breakdown_p50_ms": {
            seg: _median_or_none(r["latency_breakdown"][seg].get("p50_ms") for r in basis)
            for seg in ("publish_to_outbox", "outbox_to_attempt", "attempt_to_arrival")
        },
        "database_sessions_per_publish": med(r["database_sessions"]["per_publish"] for r in lats),
        "achieved_publish_rate": achieved,
        "deliveries_per_s_per_worker": per_worker,
        "deliveries_per_s_per_worker_rounds": rates,
        "deliveries_per_s_slow_receiver": {
            f"+{r['receiver_delay_ms']:g} ms": r["deliveries_per_s"]
            for r in report["slow_receiver"]
        },
        "slow_receiver": slow_runs,
        "sends_in_flight_at_most": in_flight,
        "hang": {
            "rounds": len(hangs),
            "p50_ms": lat_med("p50_ms", hangs),
            "p99_ms": hang_p99,
            "hung_requests": sum(r["hung_endpoint"]["requests"] for r in hangs),
        },
        "cpu_ms_per_delivery_latency_median": {
            "worker": med(r["cpu"]["cpu_ms_per_delivery"]["worker"] for r in lats),
            "postgres": med(_pg(r["cpu"]["cpu_ms_per_delivery"]) for r in lats),
            "receiver": med(r["cpu"]["cpu_ms_per_delivery"]["receiver"] for r in lats),
            "gunicorn (publishing)": med(r["cpu"]["cpu_ms_per_delivery"]["gunicorn"] for r in lats),
        },
        "cpu_ms_per_delivery_throughput_median": {
            "worker": med(r["cpu"]["cpu_ms_per_delivery"]["worker"] for r in rounds),
            "postgres": med(_pg(r["cpu"]["cpu_ms_per_delivery"]) for r in rounds),
            "receiver": med(r["cpu"]["cpu_ms_per_delivery"]["receiver"] for r in rounds),
            "redis": med(r["cpu"]["cpu_ms_per_delivery"]["redis"] for r in rounds),
        },
        "signatures_checked": sum(s["checked"] for s in sigs),
        "signatures_verified": sum(s["verified"] for s in sigs),
        "signatures_failed": sum(s["failed"] for s in sigs),
        "duplicates": sum(r["deliveries"]["duplicates"] for r in lats)
        + sum(r["duplicates"] for r in drains),
        "missing": missing,
        "foreign_cores_max": max(c["cores_used"]["foreign"] for c in runs_cpu),
        "machine_was_busy": any(c["cores_used"]["foreign"] > args.quiet_cores for c in runs_cpu),
        "verdict": {
            "p50_met": p50 is not None and p50 <= TARGET_P50_MS and missing == 0,
            "p99_met": p99 is not None and p99 <= TARGET_P99_MS and missing == 0,
            "rate_met": achieved is not None and achieved >= 0.95 * TARGET_RATE,
            "per_worker_met": per_worker >= TARGET_PER_WORKER,
            "slow_per_worker_met": all(r["target_met"] is not False for r in slow_runs),
            "hang_p99_met": not hangs or (hang_p99 is not None and hang_p99 <= TARGET_HANG_P99_MS),
        },
    }
    phases = next((r for r in report["inprocess"] if r["mode"] == "phases"), None)
    if phases:
        summary["phases"] = {
            "per_phase": phases["phases"]["per_phase"],
            "round_trips_per_delivery": phases["phases"]["round_trips_per_delivery"],
        }
    return summary
