"""The client is its own package: it builds and installs alone with pip (no Tidemark
module, only httpx), ships its ``tidemark`` console script and ``py.typed``, and the
project's environment gets it from requirements/dev.txt (as ``make test`` installs it)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import tidemark_client

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = REPO_ROOT / "clients" / "python"


def test_the_package_installs_alone_with_pip(tmp_path):
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    install = subprocess.run(
        [*pip, "--target", str(target), str(PACKAGE)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stderr

    installed = target / "tidemark_client"
    assert (installed / "py.typed").is_file()
    assert not (target / "catalog").exists() and not (target / "tests").exists()
    # The console script, run from a directory where no Tidemark module can be imported.
    script = target / "bin" / "tidemark"
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(target)}
    done = subprocess.run(
        [sys.executable, str(script), "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (0, f"tidemark {tidemark_client.__version__}\n")
    imported = subprocess.run(
        [sys.executable, "-c", "import tidemark_client, sys; print(tidemark_client.__file__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert imported.stdout.strip() == str(installed / "__init__.py"), imported.stderr


def test_the_package_declares_its_name_script_and_only_dependency():
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]

    assert project["name"] == "tidemark-client"
    assert project["scripts"] == {"tidemark": "tidemark_client.cli:main"}
    assert [d.split(">")[0] for d in project["dependencies"]] == ["httpx"]
    assert project["version"] == tidemark_client.__version__


def test_the_development_requirements_install_it_from_the_repository():
    lines = (REPO_ROOT / "requirements" / "dev.txt").read_text().splitlines()

    assert "-e ./clients/python" in lines  # relative: the lock stays host-free
    # This environment has it, with its console script beside the interpreter.
    assert metadata.version("tidemark-client") == tidemark_client.__version__
    assert Path(tidemark_client.__file__).is_relative_to(PACKAGE / "src") or pytest.fail(
        f"tidemark_client is imported from {tidemark_client.__file__}, not the repository"
    )
    assert (Path(sys.executable).parent / "tidemark").is_file()
