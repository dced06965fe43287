"""The notebooks execute top to bottom, show what they promise, and store what they show.

Each notebook keeps its executed outputs (a reader on GitHub sees results); a run here
that prints anything else than what is stored fails with the command that refreshes them.
"""

from __future__ import annotations

import base64
import struct
import zlib
from pathlib import Path

from tests.notebook_outputs import (
    REFRESH_COMMAND,
    comparable_outputs,
    execute,
    shown_text,
    stored,
)


def _run_and_match_stored(name: str) -> str:
    executed = execute(name)
    fresh, kept = comparable_outputs(executed), comparable_outputs(stored(name))
    assert len(fresh) == len(kept), f"{name}: code cells changed; run {REFRESH_COMMAND} {name}"
    for number, (now, before) in enumerate(zip(fresh, kept, strict=True), start=1):
        assert now == before, (
            f"{name}, code cell {number}: the stored outputs differ from this run's. "
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
