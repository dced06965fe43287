"""The notebooks' stored outputs: executing them, comparing them, writing them back.

The notebooks under ``notebooks/`` keep their executed outputs so a reader on GitHub
sees results. ``tests/integration_tests/test_notebooks.py`` executes each one and fails
when what it prints differs from what is stored; after a change that alters an output,
store the new outputs with::

    python -m tests.notebook_outputs            # every notebook
    python -m tests.notebook_outputs 01_quickstart.ipynb
"""

from __future__ import annotations

import argparse
import base64
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import cast

import nbclient
import nbformat
from nbformat import NotebookNode

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
"""The notebooks directory."""

REFRESH_COMMAND = "python -m tests.notebook_outputs"
"""How to store fresh outputs (named in the test's failure message)."""

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_TEMP_PATH = re.compile(r"/tmp/[^\s'\"]+")


def execute(name: str, env: Mapping[str, str] | None = None) -> NotebookNode:
    """Run ``notebooks/<name>`` top to bottom in a fresh kernel and return it, executed.

    Args:
        name: The notebook's file name.
        env: Environment variables set for the kernel (the rest is this process's).

    Returns:
        The notebook with its outputs, execution counts from 1, and no timing metadata.
    """
    notebook = _read(name)
    saved = dict(os.environ)
    os.environ.update(env or {})
    try:
        nbclient.NotebookClient(
            notebook,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(NOTEBOOKS)}},
            record_timing=False,
            coalesce_streams=True,
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return notebook


def shown_text(notebook: NotebookNode) -> str:
    """Every text and HTML output of ``notebook`` joined; each image as ``<png>``."""
    parts: list[str] = []
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            parts.append(str(output.get("text", "")))
            data = output.get("data", {})
            parts.extend(str(data.get(kind, "")) for kind in ("text/plain", "text/html"))
            if "image/png" in data:
                parts.append("<png>")
    return "\n".join(parts)


def comparable_outputs(notebook: NotebookNode) -> list[list[dict[str, object]]]:
    """Each code cell's outputs as they should match between two runs.

    Texts and HTML compare exactly (object addresses and temporary paths masked; a
    stream's consecutive pieces joined, since the kernel splits it where its flushes
    fall); images compare by kind and pixel size, since PNG bytes change with
    matplotlib's version while what they show does not.
    """
    cells: list[list[dict[str, object]]] = []
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        outputs: list[dict[str, object]] = []
        for output in cell.get("outputs", []):
            previous = outputs[-1] if outputs else {}
            if output["output_type"] == "stream" and previous.get("name") == output["name"]:
                # the kernel splits a stream where its flushes fall: one text per stream
                previous["text"] = str(previous["text"]) + _masked(str(output["text"]))
                continue
            shown: dict[str, object] = {"output_type": output["output_type"]}
            if "name" in output:  # a stream: stdout or stderr
                shown["name"] = output["name"]
            if "text" in output:
                shown["text"] = _masked(str(output["text"]))
            for kind, value in sorted(output.get("data", {}).items()):
                if kind == "image/png":
                    shown[kind] = _png_size(str(value))
                else:
                    shown[kind] = _masked(str(value))
            if output["output_type"] == "error":
                shown["error"] = f"{output['ename']}: {output['evalue']}"
            outputs.append(shown)
        cells.append(outputs)
    return cells


def store(name: str, executed: NotebookNode) -> None:
    """Write ``executed`` over ``notebooks/<name>``, outputs included."""
    nbformat.write(executed, NOTEBOOKS / name)  # type: ignore[no-untyped-call]


def stored(name: str) -> NotebookNode:
    """``notebooks/<name>`` as committed, with its stored outputs."""
    return _read(name)


def _read(name: str) -> NotebookNode:
    read = nbformat.read(NOTEBOOKS / name, as_version=4)  # type: ignore[no-untyped-call]
    return cast(NotebookNode, read)


def _masked(text: str) -> str:
    return _TEMP_PATH.sub("/tmp/...", _ADDRESS.sub(" at 0x...", text))


def _png_size(encoded: str) -> tuple[int, int]:
    header = base64.b64decode(encoded.replace("\n", "")[:44])  # PNG signature + IHDR
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def main() -> None:
    """Execute the named notebooks (all by default) and store their outputs."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("names", nargs="*", help="notebook file names (default: all)")
    names = parser.parse_args().names or sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
    for name in names:
        store(name, execute(name))


if __name__ == "__main__":
    main()
