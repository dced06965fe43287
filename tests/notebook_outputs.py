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
import difflib
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import nbclient
import nbformat
from nbformat import NotebookNode

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
"""The notebooks directory."""

REFRESH_COMMAND = "python -m tests.notebook_outputs"
"""How to store fresh outputs (named in the test's failure message)."""

STORED_WITH_THREADS = "2"
"""The torch thread count (``OMP_NUM_THREADS``) the stored outputs are made with."""

CHECKED_WITH_THREADS = "1"
"""The thread count the test runs them with: another one, so that float sums come out in
another order and an output that matches only bit for bit fails here first."""

RELATIVE_TOLERANCE = 1e-4
"""How far a printed decimal number may move between two runs, relative to its size.

A forward pass in float32 sums in another order on another CPU, BLAS kernel or thread
count; a token's probability moved by 5e-7 between 1 and 2 threads on the toy model, a
RIND value by 6e-13. 1e-4 leaves two orders of magnitude above that; any changed
answer, decision, text or count changes a word or an integer, which compare exactly."""

ABSOLUTE_TOLERANCE = 1e-6
"""How far a printed number near zero may move (entropies of 1e-7 lose their digits)."""

COLOUR_STEP = 2
"""How far a ``#rrggbb`` colour channel may move: one entry of the package's 256-entry
colour maps, whose neighbours differ by at most 2 in any channel."""

_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_TEMP_PATH = re.compile(r"/tmp/[^\s'\"]+")
_MEASURED = re.compile(
    r"(?P<colour>#[0-9a-fA-F]{6})(?![0-9a-zA-Z])"
    r"|(?<![\w.])(?P<number>-?(?:\d+\.\d+(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+))(?!\w)(?!\.\d)"
)
_HOLE = "\x00"


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


@dataclass(frozen=True, eq=False)
class PrintedText:
    """A printed text that compares equal to another run's when only its measurements moved.

    Words, integers and layout compare exactly. Each decimal number may move by
    ``RELATIVE_TOLERANCE``, ``ABSOLUTE_TOLERANCE`` or one unit of its last printed
    digit (a value rounded for display flips a digit when it sits on the boundary), and
    each ``#rrggbb`` colour by ``COLOUR_STEP`` a channel.
    """

    text: str
    """The text as printed (addresses and temporary paths masked)."""
    skeleton: str = field(init=False)
    """The text with each measurement replaced by a hole."""
    measurements: tuple[tuple[float, ...], ...] = field(init=False)
    """Each number as ``(value, unit of its last digit)``, each colour as its channels."""

    def __post_init__(self) -> None:
        found: list[tuple[float, ...]] = []

        def hole(match: re.Match[str]) -> str:
            if match["colour"]:
                colour = match["colour"]
                found.append(tuple(float(int(colour[i : i + 2], 16)) for i in (1, 3, 5)))
                return _HOLE + "c"
            found.append((float(match["number"]), _last_digit(match["number"])))
            return _HOLE + "n"

        object.__setattr__(self, "skeleton", _MEASURED.sub(hole, self.text))
        object.__setattr__(self, "measurements", tuple(found))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PrintedText):
            return NotImplemented
        if self.skeleton != other.skeleton:
            return False
        return all(
            _close(ours, theirs)
            for ours, theirs in zip(self.measurements, other.measurements, strict=True)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self.text)


def _last_digit(number: str) -> float:
    """The value of one unit in the last printed digit of ``number``."""
    mantissa, _, exponent = number.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return 10.0 ** (int(exponent or 0) - decimals)


def _close(ours: tuple[float, ...], theirs: tuple[float, ...]) -> bool:
    if len(ours) == 3:  # a colour's channels
        return all(abs(a - b) <= COLOUR_STEP for a, b in zip(ours, theirs, strict=True))
    (a, a_digit), (b, b_digit) = ours, theirs
    allowed = max(
        RELATIVE_TOLERANCE * max(abs(a), abs(b)), ABSOLUTE_TOLERANCE, max(a_digit, b_digit)
    )
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= allowed * (1 + 1e-9)


def first_difference(now: list[dict[str, object]], before: list[dict[str, object]]) -> str:
    """Where one code cell's outputs first differ, as the lines stored and printed now."""
    if len(now) != len(before):
        return f"{len(before)} outputs stored, {len(now)} now"
    for index, (ours, theirs) in enumerate(zip(now, before, strict=True), start=1):
        for key in sorted(set(ours) | set(theirs)):
            if ours.get(key) == theirs.get(key):
                continue
            old, new = str(theirs.get(key, "")), str(ours.get(key, ""))
            if isinstance(theirs.get(key), PrintedText):
                old = cast(PrintedText, theirs[key]).text
            if isinstance(ours.get(key), PrintedText):
                new = cast(PrintedText, ours[key]).text
            lines = difflib.unified_diff(
                old.splitlines(), new.splitlines(), "stored", "now", lineterm="", n=0
            )
            shown = "\n".join(line[:300] for line in list(lines)[:8])
            return f"output {index}, {key}:\n{shown}"
    return "no difference"


def comparable_outputs(notebook: NotebookNode) -> list[list[dict[str, object]]]:
    """Each code cell's outputs as they should match between two runs.

    Texts and HTML compare as ``PrintedText`` (object addresses and temporary paths
    masked; a stream's consecutive pieces joined, since the kernel splits it where its
    flushes fall): exactly but for measured numbers and colours, which may move within
    the tolerances above. Images compare by kind and pixel size, since PNG bytes change
    with matplotlib's version while what they show does not.
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
                joined = cast(PrintedText, previous["text"]).text + _masked(str(output["text"]))
                previous["text"] = PrintedText(joined)
                continue
            shown: dict[str, object] = {"output_type": output["output_type"]}
            if "name" in output:  # a stream: stdout or stderr
                shown["name"] = output["name"]
            if "text" in output:
                shown["text"] = PrintedText(_masked(str(output["text"])))
            for kind, value in sorted(output.get("data", {}).items()):
                if kind == "image/png":
                    shown[kind] = _png_size(str(value))
                else:
                    shown[kind] = PrintedText(_masked(str(value)))
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
        store(name, execute(name, {"OMP_NUM_THREADS": STORED_WITH_THREADS}))


if __name__ == "__main__":
    main()
