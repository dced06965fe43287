"""The notebooks execute top to bottom, show what they promise, and store what they show.

Each notebook keeps its executed outputs (a reader on GitHub sees results); a run here
that prints anything else than what is stored fails with the command that refreshes them.
"""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

import pytest
from nbformat import NotebookNode

from tests.notebook_outputs import (
    CHECKED_WITH_THREADS,
    REFRESH_COMMAND,
    STORED_WITH_THREADS,
    PrintedText,
    comparable_outputs,
    execute,
    first_difference,
    shown_text,
    stored,
)


def _run_and_match_stored(name: str) -> str:
    # Another thread count than the stored outputs': sums come out in another order, as
    # on another machine, so only the tolerances keep a run equal to the stored one.
    assert CHECKED_WITH_THREADS != STORED_WITH_THREADS
    executed = execute(name, {"OMP_NUM_THREADS": CHECKED_WITH_THREADS})
    fresh, kept = comparable_outputs(executed), comparable_outputs(stored(name))
    assert len(fresh) == len(kept), f"{name}: code cells changed; run {REFRESH_COMMAND} {name}"
    for number, (now, before) in enumerate(zip(fresh, kept, strict=True), start=1):
        assert now == before, (
            f"{name}, code cell {number}: the stored outputs differ from this run's "
            f"({first_difference(now, before)}). "
            f"If the change is intended, store them: {REFRESH_COMMAND} {name}"
        )
    return shown_text(executed)


def test_quickstart() -> None:
    out = _run_and_match_stored("01_quickstart.ipynb")
    assert "known_first_unknown_second" in out
    for method in ("no_retrieval", "flare", "dragin"):
        assert method in out
    assert "fired on" in out and "query:" in out  # DRAGIN's retrieval was shown
    assert "decision: retrieve = True" in out  # streamed custom events
    assert "retrieval event: query =" in out
    assert "node: draft" in out


def test_visualising_decisions() -> None:
    out = _run_and_match_stored("02_visualising_decisions.ipynb")
    assert out.count("<png>") >= 3  # graph, token strip, timeline
    assert "RIND" in out and "threshold" in out
    assert "graph TD" in out  # mermaid text


def test_evaluation_and_calibration() -> None:
    out = _run_and_match_stored("03_evaluation_and_calibration.ipynb")
    assert "| method |" in out and "dragin" in out
    assert "new: 0" in out  # the second call resumed
    assert "chosen theta:" in out
    assert "<png>" in out


def test_bring_your_own_on_the_default_model() -> None:
    out = _run_and_match_stored("04_bring_your_own_model_and_retriever.ipynb")
    for method in ("dragin", "flare", "seakr"):
        assert f"{method}:" in out


def test_bring_your_own_builds_on_a_local_model(llama_dir: Path) -> None:
    executed = execute(
        "04_bring_your_own_model_and_retriever.ipynb", {"ADAPTIVE_RAG_MODEL": str(llama_dir)}
    )
    out = shown_text(executed)
    assert "graph TD" in out
    for method in ("dragin", "flare", "seakr"):
        assert f"{method}:" in out


def test_every_notebook_stores_its_outputs_and_no_warning() -> None:
    for path in sorted(Path(__file__).resolve().parents[2].glob("notebooks/*.ipynb")):
        cells = comparable_outputs(stored(path.name))
        assert cells and all(cells), f"{path.name} has a code cell without stored output"
        errors = [o for outputs in cells for o in outputs if o.get("name") == "stderr"]
        assert errors == [], f"{path.name} shows warnings or errors: {errors}"


def test_a_changed_printed_line_is_noticed() -> None:
    notebook = stored("01_quickstart.ipynb")
    before = comparable_outputs(notebook)
    printed = next(o for c in notebook.cells for o in c.get("outputs", []) if "text" in o)
    printed["text"] += "one more line\n"
    assert comparable_outputs(notebook) != before


def test_a_stream_split_where_the_kernel_flushed_compares_equal() -> None:
    notebook = stored("01_quickstart.ipynb")
    before = comparable_outputs(notebook)
    cell = next(c for c in notebook.cells if c.get("outputs"))
    printed = next(o for o in cell["outputs"] if o["output_type"] == "stream")
    index = cell["outputs"].index(printed)
    text = printed["text"]
    head = {**printed, "text": text[: len(text) // 2]}
    tail = {**printed, "text": text[len(text) // 2 :]}
    cell["outputs"][index : index + 1] = [head, tail]
    assert comparable_outputs(notebook) == before


def test_images_compare_by_size_not_bytes() -> None:
    notebook = stored("02_visualising_decisions.ipynb")
    before = comparable_outputs(notebook)
    image = next(
        o for c in notebook.cells for o in c.get("outputs", []) if "image/png" in o.get("data", {})
    )
    width, height = _png_size(image["data"]["image/png"])
    image["data"]["image/png"] = _png_of_size(width, height)  # other pixels, same size
    assert comparable_outputs(notebook) == before
    image["data"]["image/png"] = _png_of_size(width + 1, height)
    assert comparable_outputs(notebook) != before


def _png_size(encoded: str) -> tuple[int, int]:
    png = base64.b64decode(encoded)
    return struct.unpack(">II", png[16:24])


def _png_of_size(width: int, height: int) -> str:
    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    pixels = zlib.compress(b"".join(b"\0" + bytes(width) for _ in range(height)))
    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels)
    return base64.b64encode(png + chunk(b"IEND", b"")).decode()


def _edited(name: str, old: str, new: str) -> NotebookNode:
    """``name``'s stored notebook with the first printed ``old`` replaced by ``new``."""
    notebook = stored(name)
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            texts = [("text", output)] if "text" in output else []
            texts += [(kind, output["data"]) for kind in output.get("data", {})]
            for key, holder in texts:
                if old in str(holder[key]):
                    holder[key] = str(holder[key]).replace(old, new, 1)
                    return notebook
    raise AssertionError(f"{old!r} is not printed in {name}")


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        ("01_quickstart.ipynb", "1947 (1 retrievals)", "1948 (1 retrievals)"),  # an answer
        ("01_quickstart.ipynb", "1947 (1 retrievals)", "1947 (2 retrievals)"),  # a count
        ("01_quickstart.ipynb", "retrieve = False", "retrieve = True"),  # a decision
        ("01_quickstart.ipynb", "query: Frozen born?", "query: Frozen died?"),  # a text
        ("01_quickstart.ipynb", "s=1.62 > theta", "s=1.64 > theta"),  # a score past a digit
        ("03_evaluation_and_calibration.ipynb", "new: 0", "new: 1"),  # resumed or not
        ("03_evaluation_and_calibration.ipynb", "| 0.714 |", "| 0.716 |"),  # EM past a digit
        ("04_bring_your_own_model_and_retriever.ipynb", "0.7416890263", "0.7418890263"),
    ],
)
def test_a_changed_answer_decision_text_or_score_is_noticed(name: str, old: str, new: str) -> None:
    assert comparable_outputs(_edited(name, old, new)) != comparable_outputs(stored(name))


@pytest.mark.parametrize(
    ("name", "old", "new"),
    [
        # a full-precision measurement moved as another thread count moves it
        ("04_bring_your_own_model_and_retriever.ipynb", "0.7416890263", "0.7416893263"),
        # a rounded one that sat on a digit's boundary
        ("01_quickstart.ipynb", "s=1.62 > theta", "s=1.63 > theta"),
        ("03_evaluation_and_calibration.ipynb", "| 0.714 |", "| 0.715 |"),
    ],
)
def test_a_measurement_moved_within_its_tolerance_compares_equal(
    name: str, old: str, new: str
) -> None:
    assert comparable_outputs(_edited(name, old, new)) == comparable_outputs(stored(name))


def test_printed_text_tolerances() -> None:
    assert PrintedText("p = 0.9998256272208392") == PrintedText("p = 0.9998261038876674")
    assert PrintedText("p = 0.9998256272208392") != PrintedText("p = 0.9997256272208392")
    assert PrintedText("H = 4.93e-07, 8.1e-07") == PrintedText("H = 5.1e-07, 7.9e-07")
    assert PrintedText("H = 4.93e-03") != PrintedText("H = 5.1e-03")
    assert PrintedText("born 1949") != PrintedText("born 1950")  # integers are exact
    assert PrintedText("torch 2.13.0") != PrintedText("torch 2.13.1")  # not a measurement
    assert PrintedText("background:#fd8d3c") == PrintedText("background:#fe8b3c")
    assert PrintedText("background:#fd8d3c") != PrintedText("background:#fd853c")
    assert PrintedText("s=0.51. Then") == PrintedText("s=0.52. Then")
    assert PrintedText("s=-0.51") != PrintedText("s=0.51")
    assert PrintedText("s=nan") != PrintedText("s=0.51")
    assert PrintedText("two 0.5 0.5") != PrintedText("two 0.5 0.5 0.5")
