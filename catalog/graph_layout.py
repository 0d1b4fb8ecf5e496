"""A layered left-to-right layout of a lineage graph, for a server-rendered SVG picture:
upstream to the left of the root, downstream to its right. Pure: no ORM, no Django, no
graphviz.

Steps: (1) each node's layer is its hop count from the root along edges (downstream,
positive) or against them (upstream, negative), breadth first; (2) nodes of a layer are
ordered by name, then by the mean row of their neighbours in the previous layer, swept
left to right and back (the barycentre heuristic, to uncross edges); (3) layers become
columns, each centred vertically; edges are cubic curves from a box's right side to the
next box's left side; (4) names are measured with the widest common font's advances and
wrapped onto two lines, or shortened at their start, so no name is ever clipped by its
box (the page gives each box its full name as a tooltip).
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict, deque
from dataclasses import dataclass

BOX_WIDTH, COLUMN_GAP, ROW_GAP, MARGIN = 220, 56, 12, 8
PADDING = 10  # between a box's side and its text (px)
TEXT_WIDTH = BOX_WIDTH - 2 * PADDING
LABEL_PX, CAPTION_PX = 12, 10  # font sizes, as tidemark.css sets them (.lineage .label)
LABEL_LINES = 2  # a name longer than this many lines keeps its end, after "…"
LINE_HEIGHT = 15  # px from one baseline to the next
FIRST_BASELINE = 17  # px below a box's top
ELLIPSIS = "…"

# Advance widths, in thousandths of an em, of DejaVu Sans Bold: the widest of the common
# system sans-serif faces (system-ui on many Linux desktops), so a line measured with
# them fits in any of them, bold or not. Printable ASCII from the space on; any other
# character counts as ``_WIDE`` (a full-width character is one em).
_ADVANCES = dict(
    zip(
        "".join(chr(code) for code in range(32, 127)),
        (
            348, 456, 521, 838, 696, 1002, 872, 306, 457, 457, 523, 838, 380, 415, 380, 365,
            696, 696, 696, 696, 696, 696, 696, 696, 696, 696, 400, 400, 838, 838, 838, 580,
            1000, 774, 762, 734, 830, 683, 683, 821, 837, 372, 372, 775, 637, 995, 837, 850,
            733, 850, 770, 720, 682, 812, 774, 1103, 771, 724, 725, 457, 365, 457, 838, 500,
            500, 675, 716, 593, 716, 678, 435, 716, 712, 343, 343, 665, 343, 1042, 712, 687,
            716, 716, 493, 595, 478, 712, 652, 924, 645, 652, 582, 712, 365, 712, 838,
        ),
        strict=True,
    )
)  # fmt: skip
_WIDE = 1250  # emoji and other pictographs run past one em
_MARGIN = 1.04  # rounding and hinting
# A line may end after one of these (a path's segments, a table's parts, words).
_BREAK_AFTER = frozenset("/._-:@ ,")


def text_width(text: str, px: float) -> float:
    """An upper bound of ``text``'s width in pixels at font size ``px``, in a common
    sans-serif face (``_ADVANCES``). Combining marks count nothing."""
    total = 0
    for char in text:
        advance = _ADVANCES.get(char)
        if advance is None:
            advance = 0 if unicodedata.combining(char) else _WIDE
        total += advance
    return total * px * _MARGIN / 1000


def _tail_start(text: str, width: float, px: float) -> int:
    """The smallest index whose suffix of ``text`` is at most ``width`` px wide."""
    used = 0.0
    for index in range(len(text) - 1, -1, -1):
        used += text_width(text[index], px)
        if used > width:
            return index + 1
    return 0


def fit(text: str, *, width: float = TEXT_WIDTH, px: float = LABEL_PX, lines: int = 1):
    """``text`` on at most ``lines`` lines, each at most ``width`` px wide (``text_width``).

    Lines end after a separator (``/``, ``.``, ``_``, ``-``, ``:``, ``@``, a space or a
    comma) where one leaves the line at least half full, else anywhere. Text that still
    does not fit loses its beginning to ``…``: a path's last segments say most.

    Returns:
        A tuple of 1 to ``lines`` strings; joined, they are ``text``, or a suffix of it
        after ``…`` on the first line.
    """
    shown: list[str] = []
    rest = text
    while len(rest) > 1 and text_width(rest, px) > width:
        if len(shown) == lines - 1:
            room = width - text_width(ELLIPSIS, px)
            rest = ELLIPSIS + rest[max(1, _tail_start(rest, room, px)) :]
            break
        start = min(max(1, _tail_start(rest, width, px)), len(rest) - 1)
        for after in range(start, len(rest) - 1):
            if rest[after - 1] in _BREAK_AFTER:
                if text_width(rest[after:], px) >= width / 2:
                    start = after
                break
        shown.insert(0, rest[start:])
        rest = rest[:start]
    shown.insert(0, rest)
    return tuple(shown)


def box_height(label_lines: int) -> int:
    """A box's height (px) holding ``label_lines`` lines of name and one of caption."""
    return FIRST_BASELINE + LINE_HEIGHT * label_lines + 8


@dataclass(frozen=True)
class Box:
    """A node placed in the picture: ``x``, ``y`` its top-left corner in pixels; ``label``
    the node's name in full, shown as ``lines`` (``fit``: wrapped, or its end after ``…``)
    with baselines ``line_ys``; ``caption`` its namespace (and a job's team), shortened
    the same way to one line at ``caption_y``; ``title`` the full identity, its tooltip;
    ``layer`` its column, in hops from the root (negative upstream); ``team`` a job's."""

    id: str
    kind: str
    label: str
    lines: tuple[str, ...]
    caption: str
    title: str
    x: int
    y: int
    root: bool
    dataset_id: int | None
    catalogued: bool
    layer: int = 0
    team: str = ""  # a job's team, when known

    @property
    def text_x(self) -> int:
        return self.x + PADDING

    @property
    def line_ys(self) -> list[tuple[str, int]]:
        """``(line, baseline y)`` for each line of the name."""
        return [
            (line, self.y + FIRST_BASELINE + LINE_HEIGHT * n) for n, line in enumerate(self.lines)
        ]

    @property
    def caption_y(self) -> int:
        return self.y + FIRST_BASELINE + LINE_HEIGHT * len(self.lines)


@dataclass(frozen=True)
class Link:
    """An edge placed in the picture: ``path`` is an SVG path (``d``)."""

    source: str
    target: str
    path: str
    verified: bool
    title: str


@dataclass(frozen=True)
class Layout:
    """The picture: its size and its boxes' (every box is ``box_width`` by
    ``box_height``), in pixels."""

    width: int
    height: int
    boxes: list[Box]
    links: list[Link]
    truncated: bool
    box_width: int = BOX_WIDTH
    box_height: int = box_height(1)

    def sides(self) -> list[tuple[str, list[Box]]]:
        """The picture as lists, for reading it without the picture (a phone's width):
        ``[("Upstream", boxes), ("Downstream", boxes)]``, each nearest first, then by
        name; a side with no box is left out."""
        upstream = sorted((b for b in self.boxes if b.layer < 0), key=lambda b: (-b.layer, b.label))
        downstream = sorted(
            (b for b in self.boxes if b.layer > 0), key=lambda b: (b.layer, b.label)
        )
        return [
            (name, boxes)
            for name, boxes in (("Upstream", upstream), ("Downstream", downstream))
            if boxes
        ]


def layers(node_ids: list[str], edges: list[tuple[str, str]], root: str) -> dict[str, int]:
    """Each node's layer: hops from ``root`` along edges (positive) or, for nodes not
    downstream of it, against them (negative); nodes reached neither way share layer 0."""
    forward, backward = defaultdict(list), defaultdict(list)
    for source, target in edges:
        forward[source].append(target)
        backward[target].append(source)
    layer = {root: 0}
    for neighbours, step in ((forward, 1), (backward, -1)):
        queue = deque([root])
        seen = {root}
        while queue:
            node = queue.popleft()
            for other in sorted(neighbours[node]):
                if other in seen:
                    continue
                seen.add(other)
                layer.setdefault(other, layer[node] + step)
                queue.append(other)
    for node in node_ids:
        layer.setdefault(node, 0)
    return layer


def _order(columns: dict[int, list[str]], edges: list[tuple[str, str]]) -> None:
    """Reorder each column in place by the barycentre of its neighbours' rows."""
    neighbours = defaultdict(set)
    for source, target in edges:
        neighbours[source].add(target)
        neighbours[target].add(source)
    keys = sorted(columns)
    for sweep, step in ((keys[1:], -1), (keys[-2::-1], 1)):
        for key in sweep:
            previous = key + step
            rows = {node: i for i, node in enumerate(columns.get(previous, []))}

            def barycentre(node: str, rows=rows) -> float:
                near = [rows[n] for n in neighbours[node] if n in rows]
                return sum(near) / len(near) if near else float("inf")

            columns[key].sort(key=barycentre)


def layout(graph: dict) -> Layout:
    """Place ``graph`` (``catalog.selectors.lineage_graph``'s ``{root, truncated, nodes,
    edges}``) in a picture. Every box is as tall as the longest name needs (up to
    ``LABEL_LINES`` lines), so rows stay aligned.

    Returns:
        A ``Layout`` whose ``width`` and ``height`` are the SVG's size in pixels.
    """
    nodes = {node["id"]: node for node in graph["nodes"]}
    pairs = [(e["source"], e["target"]) for e in graph["edges"]]
    layer = layers(sorted(nodes), pairs, graph["root"])
    columns: dict[int, list[str]] = defaultdict(list)
    for node_id in sorted(nodes, key=lambda n: (nodes[n]["name"], n)):
        columns[layer[node_id]].append(node_id)
    _order(columns, pairs)
    lines = {
        node_id: fit(node["name"], px=LABEL_PX, lines=LABEL_LINES)
        for node_id, node in nodes.items()
    }
    tall = box_height(max(len(shown) for shown in lines.values()))
    first = min(columns)
    tallest = max(len(c) for c in columns.values())
    height = MARGIN * 2 + tallest * tall + (tallest - 1) * ROW_GAP
    width = MARGIN * 2 + len(columns) * BOX_WIDTH + (len(columns) - 1) * COLUMN_GAP
    placed: dict[str, Box] = {}
    for key, column in columns.items():
        used = len(column) * tall + (len(column) - 1) * ROW_GAP
        top = (height - used) // 2
        x = MARGIN + (key - first) * (BOX_WIDTH + COLUMN_GAP)
        for row, node_id in enumerate(column):
            node = nodes[node_id]
            caption = node["namespace"]
            if node["type"] == "job" and node.get("team"):
                caption = f"{node['team']} · {caption}"
            placed[node_id] = Box(
                id=node_id,
                kind=node["type"],
                label=node["name"],
                lines=lines[node_id],
                caption=fit(caption, px=CAPTION_PX)[0],
                title=f"{node['type']} {node['namespace']}/{node['name']}",
                x=x,
                y=top + row * (tall + ROW_GAP),
                root=node_id == graph["root"],
                dataset_id=node.get("dataset_id"),
                catalogued=bool(node.get("catalogued")),
                layer=key,
                team=node.get("team") or "",
            )
    links = []
    for edge in graph["edges"]:
        source, target = placed[edge["source"]], placed[edge["target"]]
        x1, y1 = source.x + BOX_WIDTH, source.y + tall // 2
        x2, y2 = target.x, target.y + tall // 2
        bend = max(COLUMN_GAP // 2, abs(x2 - x1) // 2)
        links.append(
            Link(
                source=source.id,
                target=target.id,
                path=f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}",
                verified=edge["verified"],
                title=f"{edge['direction']}s · {edge['run_count']} runs",
            )
        )
    return Layout(width, height, list(placed.values()), links, graph["truncated"], BOX_WIDTH, tall)
