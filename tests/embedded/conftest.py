"""Fixtures for the embedded suite: ``make run`` stacks in temporary var dirs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from .helpers import RunningStack, running_stack


@pytest.fixture
def start_stack() -> Iterator[Callable[[Path], RunningStack]]:
    """``start_stack(var_dir) -> RunningStack``, ready to serve; every stack it started is
    killed when the test ends, whatever happened."""
    with ExitStack() as stacks:
        yield lambda var_dir: stacks.enter_context(running_stack(var_dir))


@pytest.fixture(scope="module")
def embedded_stack(tmp_path_factory) -> Iterator[RunningStack]:
    """One running ``make run`` stack shared by a module's tests, on a fresh var dir."""
    with running_stack(tmp_path_factory.mktemp("var")) as stack:
        yield stack
