"""The Configuration reference (docs/reference/configuration.md) names every environment
variable the settings read.

The names are collected from the source of ``config/settings/*.py`` (every way the
settings read the environment: ``env.<type>("NAME"``, ``env("NAME"``, the
``_database("NAME"`` and ``_prepare_threshold("NAME"`` helpers, ``"NAME" in env`` and
``os.environ``), and each must appear on that page as ```NAME```. A second test imports
the settings modules in a fresh interpreter with ``environ.Env`` recording what it is asked
for, so a new way of reading the environment that the patterns miss fails here too. No
database is needed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
SETTINGS_DIR = REPO_ROOT / "config" / "settings"
REFERENCE = REPO_ROOT / "docs" / "reference" / "configuration.md"

_NAME = r'"([A-Z][A-Z0-9_]*)"'
READS = [
    # env.str("NAME", ...), env.bool(...), env.db_url(...), env.json(...), env("NAME")
    re.compile(rf"\benv(?:\.\w+)?\(\s*{_NAME}"),
    # base.py's helpers, which pass the name on to env.db_url / env.str
    re.compile(rf"\b_database\(\s*{_NAME}"),
    re.compile(rf"\b_prepare_threshold\(\s*{_NAME}"),
    # "DATABASE_URL" not in env
    re.compile(rf"{_NAME}\s+(?:not\s+)?in\s+env\b"),
    # os.environ.get("NAME"), .setdefault, .pop, os.environ["NAME"], os.getenv("NAME")
    re.compile(rf"\bos\.environ\.\w+\(\s*{_NAME}"),
    re.compile(rf"\bos\.environ\[\s*{_NAME}\s*\]"),
    re.compile(rf"\bos\.getenv\(\s*{_NAME}"),
]
# test_embedded.py pops a tuple of names: for _name in ("A", "B"): os.environ.pop(_name)
NAME_LOOP = re.compile(r"for\s+\w+\s+in\s+\(([^)]*)\):\s*\n\s*os\.environ")


def settings_variables() -> set[str]:
    names: set[str] = set()
    for path in sorted(SETTINGS_DIR.glob("*.py")):
        source = path.read_text()
        for pattern in READS:
            names.update(pattern.findall(source))
        for group in NAME_LOOP.findall(source):
            names.update(re.findall(_NAME, group))
    return names


def reference_page() -> str:
    page = REFERENCE.read_text()
    assert page.startswith("# Configuration reference\n"), page[:80]
    return page


def test_every_variable_the_settings_read_is_in_the_configuration_reference():
    names = settings_variables()
    # The patterns still see the settings' main ways of reading the environment.
    assert {"DATABASE_URL", "WATCHDOG_DATABASE_URL", "CELERY_BROKER_URL"} <= names
    assert {"DATABASE_PREPARE_THRESHOLD", "TIDEMARK_IGNORE_DOTENV"} <= names
    documented = set(re.findall(r"`([A-Z][A-Z0-9_]*)`", reference_page()))
    missing = sorted(names - documented)
    assert not missing, (
        "environment variables read in config/settings/ but not in "
        f"docs/reference/configuration.md (as `NAME`): {missing}"
    )


_RECORDER = r"""
import importlib, json, os, sys
import environ

seen = set()
get_value = environ.Env.get_value
contains = environ.Env.__contains__

def recording_get_value(self, var, *args, **kwargs):
    seen.add(var)
    return get_value(self, var, *args, **kwargs)

def recording_contains(self, var):
    seen.add(var)
    return contains(self, var)

environ.Env.get_value = recording_get_value
environ.Env.__contains__ = recording_contains
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(seen)))
"""


def _recorded(module: str, env: dict[str, str]) -> set[str]:
    result = subprocess.run(
        [sys.executable, "-c", _RECORDER, module],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return set(json.loads(result.stdout.strip().splitlines()[-1]))


def test_the_source_patterns_find_every_variable_the_settings_ask_for():
    """What the settings modules really ask ``environ.Env`` for, embedded and configured,
    is all found by the source patterns above."""
    with tempfile.TemporaryDirectory(prefix="tidemark-config-reference-") as var_dir:
        base_env = {
            "PATH": "/usr/bin:/bin",
            "TIDEMARK_IGNORE_DOTENV": "1",
            "TIDEMARK_VAR_DIR": var_dir,
        }
        configured = {
            **base_env,
            "DATABASE_URL": "postgres://tidemark@db.invalid:5432/tidemark",
            "WATCHDOG_DATABASE_URL": "postgres://tidemark@wd.invalid:5432/watchdog",
            "CELERY_BROKER_URL": "redis://redis.invalid:6379/0",
            "DJANGO_SECRET_KEY": "not-a-real-key",
            "TIDEMARK_ENCRYPTION_KEYS": "vX8d4bV0m3CwQY2t1b7h2oB0p9m5k0p5Yl0yW3ZtW1o=",
        }
        asked: set[str] = set()
        for module in ("config.settings.local", "config.settings.watchdog"):
            asked |= _recorded(module, base_env)
        for module in (
            "config.settings.production",
            "config.settings.watchdog",
            "config.settings.bench",
        ):
            asked |= _recorded(module, configured)
    missed = sorted(asked - settings_variables())
    assert not missed, f"read by the settings but not found in their source: {missed}"
