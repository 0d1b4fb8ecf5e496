"""A layered left-to-right layout of a lineage graph, for a server-rendered SVG picture:
upstream to the left of the root, downstream to its right. Pure: no ORM, no Django, no
graphviz.

Steps: (1) each node's layer is its hop count from the root along edges (downstream,
positive) or against them (upstream, negative), breadth first; (2) nodes of a layer are
ordered by name, then by the mean row of their neighbours in the previous layer, swept
left to right and back (the barycentre heuristic, to uncross edges); (3) layers become
columns, each centred vertically; edges are cubic curves from a box's right side to the
next box's left side.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass

BOX_WIDTH, BOX_HEIGHT, COLUMN_GAP, ROW_GAP, MARGIN = 200, 40, 56, 12, 8
MAX_LABEL = 30


@dataclass(frozen=True)
class Box:
    """A node placed in the picture: ``x``, ``y`` its top-left corner in pixels;
    ``label`` the (shortened) name, ``caption`` its namespace (and a job's team)."""

    id: str
    kind: str
    label: str
    caption: str
    title: str
    x: int
    y: int
    root: bool
    dataset_id: int | None
    catalogued: bool


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
    width: int
    height: int
    boxes: list[Box]
    links: list[Link]
    truncated: bool


def shorten(text: str, limit: int = MAX_LABEL) -> str:
    """``text`` cut to ``limit`` characters, keeping its end (a path's last segments say
    most): ``…ders/daily``."""
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


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
    edges}``) in a picture.

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
    first = min(columns)
    tallest = max(len(c) for c in columns.values())
    height = MARGIN * 2 + tallest * BOX_HEIGHT + (tallest - 1) * ROW_GAP
    width = MARGIN * 2 + len(columns) * BOX_WIDTH + (len(columns) - 1) * COLUMN_GAP
    placed: dict[str, Box] = {}
    for key, column in columns.items():
        used = len(column) * BOX_HEIGHT + (len(column) - 1) * ROW_GAP
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
                label=shorten(node["name"]),
                caption=shorten(caption, MAX_LABEL + 4),
                title=f"{node['type']} {node['namespace']}/{node['name']}",
                x=x,
                y=top + row * (BOX_HEIGHT + ROW_GAP),
                root=node_id == graph["root"],
                dataset_id=node.get("dataset_id"),
                catalogued=bool(node.get("catalogued")),
            )
    links = []
    for edge in graph["edges"]:
        source, target = placed[edge["source"]], placed[edge["target"]]
        x1, y1 = source.x + BOX_WIDTH, source.y + BOX_HEIGHT // 2
        x2, y2 = target.x, target.y + BOX_HEIGHT // 2
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
    return Layout(width, height, list(placed.values()), links, graph["truncated"])
