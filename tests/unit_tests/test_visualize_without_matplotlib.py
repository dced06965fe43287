"""matplotlib is optional (the ``plots`` extra): the core and the text views work without it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HINT = 'pip install "langchain-adaptive-rag[plots]"'

# Runs in a fresh interpreter in which `import matplotlib` fails, as where it is not installed.
SCRIPT = textwrap.dedent(
    """
    import contextlib
    import io
    import json
    import sys
    import tempfile
    from pathlib import Path

    sys.modules["matplotlib"] = None  # any import of matplotlib or a submodule now fails

    import langchain_adaptive_rag
    import langchain_adaptive_rag.cli
    import langchain_adaptive_rag.evaluation
    import langchain_adaptive_rag.graphs
    import langchain_adaptive_rag.retrievers
    import langchain_adaptive_rag.toyworld
    from langchain_adaptive_rag.cli import main
    from langchain_adaptive_rag.graphs.flare import create_flare_graph
    from langchain_adaptive_rag.testing import FakeTraceModel
    from langchain_adaptive_rag.visualize import (
        RunRecord,
        draw_graph,
        graph_figure,
        graph_mermaid,
        record_run,
        report_html,
        timeline_figure,
        tokens_figure,
        tokens_html,
    )
    from tests.helpers import flare_script
    from tests.helpers.scripted import NO_SHOTS, QUESTION, RecordingRetriever

    out = {}
    model = FakeTraceModel(
        [flare_script.draft(), " Anna Berg was born in 1930. More.", " So the answer is 1930."]
    )
    graph = create_flare_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    record = record_run(graph, QUESTION)
    out["answer"] = record.answer
    out["html"] = tokens_html(record, "probability")
    out["repr_html"] = record._repr_html_()
    out["round_trip"] = RunRecord.from_json(record.to_json()) == record
    out["mermaid"] = graph_mermaid(graph)
    folder = Path(tempfile.mkdtemp())
    out["mmd"] = draw_graph(graph, folder / "graph.mmd").read_text(encoding="utf-8")
    out["report_without_pictures"] = report_html([], title="empty")

    errors = {}
    drawings = {
        "tokens_figure": lambda: tokens_figure(record),
        "timeline_figure": lambda: timeline_figure(record),
        "graph_figure": lambda: graph_figure(graph),
        "draw_graph": lambda: draw_graph(graph, folder / "graph.png"),
        "report_html": lambda: report_html([record], title="run"),
    }
    for name, draw in drawings.items():
        try:
            draw()
        except ImportError as error:
            errors[name] = str(error)
    out["errors"] = errors
    out["png_written"] = (folder / "graph.png").exists()

    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        out["demo_html_status"] = main(["demo", "--html", str(folder / "report.html")])
    out["demo_html_stderr"] = stderr.getvalue()
    out["matplotlib_loaded"] = sorted(
        name for name, module in sys.modules.items()
        if name.split(".")[0] == "matplotlib" and module is not None
    )
    print(json.dumps(out))
    """
)


def test_core_and_text_views_work_and_drawings_name_the_extra_without_matplotlib() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["matplotlib_loaded"] == []
    # the text views: records, the coloured HTML tokens, the mermaid graph
    assert out["answer"] == "1930" and out["round_trip"]
    assert 'class="arag-draft"' in out["html"] and "background:#" in out["html"]
    assert 'class="arag-draft"' in out["repr_html"]
    assert "score_need" in out["mermaid"]
    assert out["mmd"] == out["mermaid"]
    assert "<h1>empty</h1>" in out["report_without_pictures"]
    # every drawing fails with the install hint, and writes nothing
    assert set(out["errors"]) == {
        "tokens_figure",
        "timeline_figure",
        "graph_figure",
        "draw_graph",
        "report_html",
    }
    for name, message in out["errors"].items():
        assert message.startswith(name), message
        assert "matplotlib, which is not installed" in message and HINT in message, message
    assert not out["png_written"]
    # the demo's HTML report says so before it runs anything
    assert out["demo_html_status"] == 2
    assert "adaptive-rag demo --html draws with matplotlib" in out["demo_html_stderr"]
    assert HINT in out["demo_html_stderr"]
