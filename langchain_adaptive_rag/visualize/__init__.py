"""See every decision of an adaptive-RAG run: records, graph pictures, token heat-maps.

```python
from langchain_adaptive_rag.visualize import draw_graph, record_run, report_html, tokens_html

record = record_run(graph, "When was the director of film Blue Harbour born?")
tokens_html(record, "rind")  # or just `record` as the last line of a notebook cell
draw_graph(graph, "dragin.svg")  # .png, .svg (offline, matplotlib) or .mmd (mermaid)
html_page = report_html([record], title="DRAGIN on one question")
```

Everything is drawn offline with matplotlib: no mermaid.ink, no graphviz, no pyplot state.
matplotlib is an optional dependency, the ``plots`` extra
(``pip install "langchain-adaptive-rag[plots]"``): records, [`tokens_html`][] and
[`graph_mermaid`][] work without it, and a function that draws a picture raises an
``ImportError`` that names the extra.
"""

from langchain_adaptive_rag.visualize._style import Signal, default_signal
from langchain_adaptive_rag.visualize.figures import timeline_figure, tokens_figure
from langchain_adaptive_rag.visualize.graph import (
    DrawableGraph,
    draw_graph,
    graph_figure,
    graph_mermaid,
)
from langchain_adaptive_rag.visualize.html_view import tokens_html
from langchain_adaptive_rag.visualize.record import (
    Decision,
    Retrieval,
    Round,
    TokenRecord,
    WordRecord,
)
from langchain_adaptive_rag.visualize.recording import AttentionSource, record_run
from langchain_adaptive_rag.visualize.report import figure_png_base64, report_html
from langchain_adaptive_rag.visualize.run_record import RunRecord

__all__ = [
    "AttentionSource",
    "Decision",
    "DrawableGraph",
    "Retrieval",
    "Round",
    "RunRecord",
    "Signal",
    "TokenRecord",
    "WordRecord",
    "default_signal",
    "draw_graph",
    "figure_png_base64",
    "graph_figure",
    "graph_mermaid",
    "record_run",
    "report_html",
    "timeline_figure",
    "tokens_figure",
    "tokens_html",
]
