"""YAML read within the limits a JSON body has: PyYAML's safe loader, composing at most
``MAX_DEPTH`` levels (``httpkit.storable``, as the JSON parser) and ``MAX_VALUES`` values,
an alias counting as a copy of everything it names, so a "billion laughs" document of a
few hundred bytes is refused before anything walks it. Pure: no database."""

from __future__ import annotations

from typing import Any

import yaml

from httpkit.storable import MAX_DEPTH

# The most values (scalars, lists and mappings) a document may expand to: 500 datasets
# with every field are about 18,000.
MAX_VALUES = 50_000


def safe_load(text: str) -> Any:
    """``yaml.safe_load`` of one document, within the limits.

    Raises:
        OverLimit: nested deeper than ``MAX_DEPTH``, more than ``MAX_VALUES`` values, or
            an alias to a node that contains it.
        yaml.YAMLError: not YAML.
        ValueError, OverflowError, TypeError: a scalar its tag cannot construct (a
            timestamp 2026-13-45, an integer of more than 4,300 digits).
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


class OverLimit(yaml.MarkedYAMLError):
    """A document over a limit; ``rule`` names it (``depth``, ``max_values``,
    ``yaml_alias``), ``problem`` and ``problem_mark`` say what and where."""

    def __init__(self, problem: str, rule: str, mark) -> None:
        super().__init__(problem=problem, problem_mark=mark)
        self.rule = rule


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that counts values as it composes them (an alias counts as
    everything it names) and measures each node's height. Composing stops at the first
    node past ``MAX_DEPTH`` levels, so deep nesting never reaches Python's recursion
    limit, and at the first value past ``MAX_VALUES``, which also bounds the time spent
    (pure-Python YAML: 0.1 to 0.2 ms a value; 50,000 take 4 to 10 s)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._level = 0  # nodes open above the one being composed
        self._values = 0  # composed so far, aliases expanded
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height)

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:
                measured = self._measured.get(id(node))
                if measured is None:
                    raise OverLimit(
                        f"alias *{event.anchor} refers to a node that contains it",
                        "yaml_alias",
                        event.start_mark,
                    )
                self._count(measured[0], event.start_mark)
                self._check_depth(self._level + measured[1], event.start_mark)
            return super().compose_node(parent, index)
        self._count(1, event.start_mark)
        self._check_depth(self._level, event.start_mark)
        self._level += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._level -= 1
        children = node.value if isinstance(node, yaml.SequenceNode) else ()
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        sizes = [self._measured[id(child)] for child in children]
        self._measured[id(node)] = (
            1 + sum(size for size, _ in sizes),
            1 + max((height for _, height in sizes), default=-1),
        )
        return node

    def _count(self, values: int, mark) -> None:
        self._values += values
        if self._values > MAX_VALUES:
            raise OverLimit(
                f"more than {MAX_VALUES} values (an alias counts as what it names)",
                "max_values",
                mark,
            )

    def _check_depth(self, level: int, mark) -> None:
        if level > MAX_DEPTH:
            raise OverLimit(f"nested deeper than {MAX_DEPTH} levels", "depth", mark)
