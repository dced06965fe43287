"""A method's graph as mermaid text, PNG or SVG, drawn offline.

LangGraph's ``draw_mermaid_png()`` sends the drawing to the mermaid.ink web service and
``draw_png()`` needs graphviz; here the nodes are laid out in layers from ``__start__`` to
``__end__`` (longest path over the graph without its loops) and drawn with matplotlib.
Edges between neighbouring layers are straight; longer edges run in lanes at the right
(forward) or left (back to an earlier node) of the column. Conditional edges are dashed
and labelled with the router's path name. The mermaid text and the layout need no
matplotlib; the pictures import it when they are drawn (the ``plots`` extra).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.runnables.graph import Graph

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.visualize._matplotlib import require_matplotlib

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "DrawableGraph",
    "GraphLayout",
    "draw_graph",
    "graph_figure",
    "graph_mermaid",
    "layout_graph",
]

_CHAR_W = 0.6 * 10 / 72
"""Width in inches of one 10 pt monospace character."""
_NODE_H = 0.46
_LAYER_DY = 0.9
_LANE_DX = 0.34
_MARGIN = 0.45
_FILL = {"__start__": "#ffffff", "__end__": "#bfb6fc"}
_DEFAULT_FILL = "#f2f0ff"
_EDGE = "#3b3486"
_FORMATS = (".png", ".svg", ".mmd")


class DrawableGraph(Protocol):
    """Anything with LangGraph's ``get_graph()`` (a compiled graph)."""

    def get_graph(self, config: Any = None, *, xray: int | bool = False) -> Graph:
        """The drawable graph (``xray``: subgraphs drawn inside their nodes)."""
        ...


@dataclass(frozen=True)
class _Box:
    name: str
    x: float
    y: float
    width: float

    @property
    def left(self) -> float:
        return self.x - self.width / 2

    @property
    def right(self) -> float:
        return self.x + self.width / 2


@dataclass(frozen=True)
class _Route:
    source: str
    target: str
    points: list[tuple[float, float]]
    conditional: bool
    label: str | None
    label_at: tuple[float, float]
    label_vertical: bool


@dataclass(frozen=True)
class GraphLayout:
    """Node boxes and edge routes in inches (y grows upwards)."""

    boxes: dict[str, _Box]
    routes: list[_Route]
    width: float
    height: float


def _drawable(graph: DrawableGraph | Graph, *, xray: bool = False) -> Graph:
    """The drawable graph; ``xray``: with subgraphs' nodes inside their node."""
    if isinstance(graph, Graph):
        return graph
    get_graph = getattr(graph, "get_graph", None)
    if get_graph is None:
        msg = (
            f"Expected a compiled LangGraph graph (with get_graph()), got "
            f"{type(graph).__name__}. Fix: pass the result of create_adaptive_rag_graph(...)."
        )
        raise AdaptiveRAGError(msg)
    drawable: Graph = get_graph(xray=xray)
    return drawable


def graph_mermaid(graph: DrawableGraph | Graph) -> str:
    """The graph as mermaid text (``get_graph(xray=True).draw_mermaid()``; works offline).

    A router's routes (Adaptive-RAG's three graphs) are drawn as mermaid subgraphs with
    their nodes; the PNG and SVG pictures show each route as one node.

    Args:
        graph: A compiled graph or its drawable ``Graph``.

    Returns:
        Mermaid flowchart text.
    """
    return _drawable(graph, xray=True).draw_mermaid()


def _layers(nodes: Sequence[str], edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layer of each node, after removing the edges that close loops."""
    children: dict[str, list[str]] = {n: [] for n in nodes}
    for source, target in edges:
        children[source].append(target)
    start = "__start__" if "__start__" in children else nodes[0]
    state: dict[str, int] = {}  # 1: on the DFS stack, 2: done
    order: list[str] = []
    back: set[tuple[str, str]] = set()

    def visit(node: str) -> None:
        state[node] = 1
        for child in children[node]:
            if state.get(child) == 1:
                back.add((node, child))
            elif child not in state:
                visit(child)
        state[node] = 2
        order.append(node)

    for root in [start, *nodes]:
        if root not in state:
            visit(root)
    layer = dict.fromkeys(nodes, 0)
    for node in reversed(order):  # reverse post-order is a topological order of the DAG
        for child in children[node]:
            if (node, child) not in back:
                layer[child] = max(layer[child], layer[node] + 1)
    return layer


def layout_graph(graph: DrawableGraph | Graph) -> GraphLayout:
    """Lay the graph out in layers, top to bottom, with lanes for long and back edges.

    Args:
        graph: A compiled graph or its drawable ``Graph``.

    Returns:
        Boxes and routes in inches.
    """
    drawable = _drawable(graph)
    names = [str(n) for n in drawable.nodes]
    edge_list = [(str(e.source), str(e.target)) for e in drawable.edges]
    layer = _layers(names, edge_list)
    depth = max(layer.values(), default=0)
    by_layer: dict[int, list[str]] = {}
    for name in names:
        by_layer.setdefault(layer[name], []).append(name)
    widths = {n: len(n) * _CHAR_W + 0.45 for n in names}
    row_widths = [sum(widths[n] for n in row) + 0.4 * (len(row) - 1) for row in by_layer.values()]
    core = max(row_widths, default=1.0)
    # edges that skip a layer or go back run in lanes; count them per side
    long_forward = sorted(
        (e for e in drawable.edges if layer[e.target] - layer[e.source] > 1),
        key=lambda e: layer[e.target] - layer[e.source],
    )
    backward = sorted(
        (e for e in drawable.edges if layer[e.target] <= layer[e.source]),
        key=lambda e: layer[e.source] - layer[e.target],
    )
    left_space = _MARGIN + _LANE_DX * (len(backward) + 0.5)
    right_space = _MARGIN + _LANE_DX * (len(long_forward) + 0.5)
    width = left_space + core + right_space
    height = 2 * _MARGIN + 0.35 + depth * _LAYER_DY + _NODE_H
    centre = left_space + core / 2
    boxes: dict[str, _Box] = {}
    for index, row in by_layer.items():
        x = centre - row_widths[list(by_layer).index(index)] / 2
        y = height - _MARGIN - 0.35 - _NODE_H / 2 - index * _LAYER_DY
        for name in row:
            boxes[name] = _Box(name, x + widths[name] / 2, y, widths[name])
            x += widths[name] + 0.4
    core_left, core_right = centre - core / 2, centre + core / 2
    ports = _side_ports(drawable, layer, boxes)
    routes: list[_Route] = []
    for edge in drawable.edges:
        source, target = boxes[str(edge.source)], boxes[str(edge.target)]
        label = (str(edge.data) if edge.data else target.name) if edge.conditional else None
        span = layer[target.name] - layer[source.name]
        if span == 1:
            start = (source.x, source.y - _NODE_H / 2)
            end = (target.x, target.y + _NODE_H / 2)
            middle = ((start[0] + end[0]) / 2 + 0.08, (start[1] + end[1]) / 2)
            routes.append(
                _Route(
                    source.name,
                    target.name,
                    [start, end],
                    edge.conditional,
                    label,
                    middle,
                    False,
                )
            )
            continue
        if span > 1:
            lane_x = core_right + _LANE_DX * (long_forward.index(edge) + 1)
            x_from, x_to = source.right, target.right
        else:
            lane_x = core_left - _LANE_DX * (backward.index(edge) + 1)
            x_from, x_to = source.left, target.left
        y_from = ports[(edge.source, edge.target, "out")]
        y_to = ports[(edge.source, edge.target, "in")]
        points = [(x_from, y_from), (lane_x, y_from), (lane_x, y_to), (x_to, y_to)]
        routes.append(
            _Route(
                source.name,
                target.name,
                points,
                edge.conditional,
                label,
                (lane_x, (y_from + y_to) / 2),
                True,
            )
        )
    return GraphLayout(boxes=boxes, routes=routes, width=width, height=height)


def _side_ports(
    drawable: Graph, layer: dict[str, int], boxes: dict[str, _Box]
) -> dict[tuple[str, str, str], float]:
    """Heights where lane edges leave and enter box sides, spread when a side has several."""
    uses: dict[tuple[str, str], list[tuple[str, str, str]]] = {}
    for edge in drawable.edges:
        span = layer[edge.target] - layer[edge.source]
        if span == 1:
            continue
        side = "right" if span > 1 else "left"
        uses.setdefault((edge.source, side), []).append((edge.source, edge.target, "out"))
        uses.setdefault((edge.target, side), []).append((edge.source, edge.target, "in"))
    ports: dict[tuple[str, str, str], float] = {}
    for (node, _side), keys in uses.items():
        count = len(keys)
        for index, key in enumerate(keys):
            offset = 0.0 if count == 1 else (0.5 - (index + 0.5) / count) * _NODE_H * 0.7
            ports[key] = boxes[node].y + offset
    return ports


def graph_figure(graph: DrawableGraph | Graph, *, title: str | None = None) -> Figure:
    """Draw the graph with matplotlib (no network, no graphviz).

    Args:
        graph: A compiled graph or its drawable ``Graph``.
        title: Heading (default: the compiled graph's name).

    Returns:
        The figure (sized in inches to the layout).

    Raises:
        ImportError: matplotlib is not installed (the ``plots`` extra).
    """
    require_matplotlib("graph_figure")
    from matplotlib.figure import Figure
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    layout = layout_graph(graph)
    heading = title if title is not None else str(getattr(graph, "name", "") or "graph")
    fig = Figure(figsize=(layout.width, layout.height + 0.05))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    ax.set_xlim(0, layout.width)
    ax.set_ylim(-0.05, layout.height)
    ax.set_axis_off()
    ax.text(
        layout.width / 2,
        layout.height - _MARGIN / 2 - 0.1,
        heading,
        ha="center",
        va="center",
        fontsize=12,
        fontweight="bold",
    )
    for route in layout.routes:
        style = (0, (4, 3)) if route.conditional else "solid"
        xs = [p[0] for p in route.points]
        ys = [p[1] for p in route.points]
        ax.plot(xs, ys, color=_EDGE, linewidth=1.2, linestyle=style, zorder=1)
        ax.add_patch(
            FancyArrowPatch(
                route.points[-2],
                route.points[-1],
                arrowstyle="-|>",
                mutation_scale=12,
                color=_EDGE,
                linewidth=0,
                shrinkA=0,
                shrinkB=0,
                zorder=2,
            )
        )
        if route.label:
            ax.text(
                *route.label_at,
                route.label,
                ha="center" if route.label_vertical else "left",
                va="center",
                rotation=90 if route.label_vertical else 0,
                fontsize=8.5,
                fontstyle="italic",
                color=_EDGE,
                bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none"},
                zorder=3,
            )
    for box in layout.boxes.values():
        terminal = box.name in _FILL
        ax.add_patch(
            FancyBboxPatch(
                (box.left, box.y - _NODE_H / 2),
                box.width,
                _NODE_H,
                boxstyle="round,pad=0,rounding_size=" + ("0.23" if terminal else "0.08"),
                facecolor=_FILL.get(box.name, _DEFAULT_FILL),
                edgecolor=_EDGE,
                linewidth=1.3,
                linestyle="--" if box.name == "__start__" else "solid",
                zorder=4,
            )
        )
        ax.text(
            box.x,
            box.y,
            box.name,
            ha="center",
            va="center",
            fontsize=10,
            family="monospace",
            zorder=5,
        )
    ax.text(
        layout.width / 2,
        0.12,
        "solid: always taken   dashed: conditional, labelled with the router's path",
        ha="center",
        va="center",
        fontsize=7,
        color="#555555",
    )
    return fig


def draw_graph(graph: DrawableGraph | Graph, path: str | Path, *, dpi: int = 150) -> Path:
    """Write the graph to ``path``: ``.png`` or ``.svg`` (drawn offline), ``.mmd`` (mermaid).

    Args:
        graph: A compiled graph or its drawable ``Graph``.
        path: Output file; its suffix picks the format.
        dpi: Resolution of a PNG.

    Returns:
        The path written.

    Raises:
        AdaptiveRAGError: The suffix is not one of ``.png``, ``.svg``, ``.mmd``.
        ImportError: A ``.png`` or ``.svg`` is asked for and matplotlib is not installed
            (the ``plots`` extra).
    """
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix not in _FORMATS:
        msg = (
            f"draw_graph received path {str(out)!r} with suffix {suffix!r}. Expected one of "
            f"{', '.join(_FORMATS)}. Fix: name the file graph.png, graph.svg or graph.mmd."
        )
        raise AdaptiveRAGError(msg)
    if suffix == ".mmd":
        out.write_text(graph_mermaid(graph), encoding="utf-8")
        return out
    require_matplotlib(f"draw_graph (to {suffix})")
    import matplotlib as mpl

    fig = graph_figure(graph)
    # keep SVG text as <text> (searchable, selectable) rather than glyph outlines
    with mpl.rc_context({"svg.fonttype": "none", "svg.hashsalt": "adaptive-rag"}):
        fig.savefig(out, format=suffix[1:], dpi=dpi, facecolor="white")
    return out
