"""The embedded demo in tests: settings as ``make run`` has them (embedded, a ``local``
storage source, a watchdog to feed), and loading it as ``bin/run`` does."""

from __future__ import annotations

import io
from pathlib import Path

from django.core.management import call_command

DEMO_HOOK_URL = "http://127.0.0.1:8000/demo/hooks/{team}"


def embedded_demo_settings(settings, var_dir: Path) -> Path:
    """Point the settings at ``var_dir`` as ``make run`` does (embedded mode, the demo
    lake, a watchdog fed by the catalog); returns ``var_dir``."""
    var_dir.mkdir(parents=True, exist_ok=True)
    settings.EMBEDDED = True
    settings.VAR_DIR = var_dir
    settings.TIDEMARK_STORAGE_SOURCES = {"local": {"url": f"file://{var_dir}/lake"}}
    settings.TIDEMARK_WATCHDOG_URL = "http://127.0.0.1:8001"
    settings.TIDEMARK_WATCHDOG_TOKEN = "wd_demo_test"
    return var_dir


def load_like_make_run(monkeypatch) -> dict[str, str]:
    """``load_demo`` then ``load_watchdog_demo``, as ``bin/run`` runs them; returns their
    output and the two logins (``{"key", "watchdog", "login", "oncall"}``: the logins as
    ``(username, password)`` read from their 0600 files)."""
    from django.conf import settings

    # The watchdog's command refuses a configured watchdog database; the test's is set
    # up already, whatever the variable says now.
    monkeypatch.delenv("WATCHDOG_DATABASE_URL", raising=False)
    key, watchdog = io.StringIO(), io.StringIO()
    call_command("load_demo", stdout=key)
    call_command("load_watchdog_demo", stdout=watchdog)
    return {
        "key": key.getvalue().strip(),
        "watchdog": watchdog.getvalue().strip(),
        "login": tuple((settings.VAR_DIR / "demo-login").read_text().split()),
        "oncall": tuple((settings.VAR_DIR / "demo-oncall-login").read_text().split()),
    }
