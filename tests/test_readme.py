"""README.md stays a page a newcomer reads in five minutes: short, the two set-up commands
on its first screen, every link and picture resolving in the repository, and every `make`
command it shows a real target. (Its Try it commands run against a `make run` stack in
tests/embedded/test_readme_walkthrough.py; the documentation site is built with
`make docs`, whose strict build fails on a broken link.) No database is needed."""

from __future__ import annotations

import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
README = REPO_ROOT / "README.md"
MAX_LINES = 250
FIRST_SCREEN = 30  # lines

# [text](target) and ![alt](target); autolinks <http://...> are not repository files.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
SHELL_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.M | re.S)
MAKE_COMMAND = re.compile(r"^make ([a-z][a-z0-9-]*)", re.M)
MAKE_TARGET = re.compile(r"^([a-z][a-z0-9-]*):", re.M)


def test_the_readme_is_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"


def test_the_two_set_up_commands_are_on_the_first_screen():
    first_screen = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN]) + "\n"
    commands = [
        line.split("#")[0].strip()
        for block in SHELL_BLOCK.findall(first_screen)
        for line in block.splitlines()
    ]
    assert commands[:2] == ["make run", "make test"], commands


def test_every_relative_link_and_picture_in_the_readme_exists():
    targets = LINK.findall(README.read_text())
    relative = [t for t in targets if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert "docs/screenshots/catalog.png" in relative  # the one picture
    missing = [t for t in relative if not (REPO_ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"


def test_every_make_command_in_the_readme_is_a_makefile_target():
    shown = {
        target
        for block in SHELL_BLOCK.findall(README.read_text())
        for target in MAKE_COMMAND.findall(block)
    }
    targets = set(MAKE_TARGET.findall((REPO_ROOT / "Makefile").read_text()))
    assert {"run", "test", "demo", "docs"} <= shown
    assert shown <= targets, f"README.md shows make targets the Makefile lacks: {shown - targets}"
