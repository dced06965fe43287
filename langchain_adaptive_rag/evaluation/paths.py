"""Checks of input and output paths, made before any slow work (loading data or a model).

Each check changes nothing on disk and raises
[`AdaptiveRAGError`][] saying what was received, what
was expected and the fix, naming the command-line option the path came from.
"""

from __future__ import annotations

import os
from pathlib import Path

from langchain_adaptive_rag.errors import AdaptiveRAGError

__all__ = ["check_input_file", "check_output_dir", "check_output_file"]


def _nearest_existing(path: Path) -> Path:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _check_creatable(path: Path, what: str, option: str) -> None:
    """The folders above ``path`` exist or can be made, and the nearest is writable."""
    probe = _nearest_existing(path.parent)
    if not probe.is_dir():
        msg = (
            f"Received the {what} {str(path)!r}, but {str(probe)!r} on its path is a file; "
            f"expected a path whose folders can be created. Fix: pick another {option}."
        )
        raise AdaptiveRAGError(msg)
    if not os.access(probe, os.W_OK | os.X_OK):
        msg = (
            f"Received the {what} {str(path)!r}, but this user may not create files in "
            f"{str(probe)!r}; expected a writable location. Fix: pick another {option} or "
            "change the folder's permissions."
        )
        raise AdaptiveRAGError(msg)


def check_output_dir(
    path: str | os.PathLike[str], *, what: str = "output directory", option: str = "--out"
) -> Path:
    """Check that a directory exists and is writable, or can be created.

    Args:
        path: The directory.
        what: What it is, for the message (``"output directory"``, ``"index directory"``).
        option: The option that named it, for the fix (``"--out"``).

    Returns:
        The path.

    Raises:
        AdaptiveRAGError: The path is a file, a file sits on its path, or the user may not
            write there.
    """
    out = Path(path)
    if not out.exists():
        _check_creatable(out, what, option)
        return out
    if not out.is_dir():
        msg = (
            f"Received the {what} {str(out)!r}, which is a file; expected a directory (it "
            f"is created when missing). Fix: pick another {option}, or move the file away."
        )
        raise AdaptiveRAGError(msg)
    if not os.access(out, os.W_OK | os.X_OK):
        msg = (
            f"Received the {what} {str(out)!r}, but this user may not write to it; expected "
            f"a writable directory. Fix: pick another {option} or change its permissions."
        )
        raise AdaptiveRAGError(msg)
    return out


def check_output_file(path: str | os.PathLike[str], *, what: str, option: str) -> Path:
    """Check that a file can be written (its folder is created when missing).

    Args:
        path: The file.
        what: What it is, for the message (``"table file"``).
        option: The option that named it (``"--out"``, ``"--html"``).

    Returns:
        The path.

    Raises:
        AdaptiveRAGError: The path is a directory, a file sits on its path, or the user
            may not write there.
    """
    target = Path(path)
    if target.is_dir():
        msg = (
            f"Received the {what} {str(target)!r}, which is a directory; expected a file "
            f"name. Fix: give {option} a file name, e.g. {str(target / 'table.md')!r}."
        )
        raise AdaptiveRAGError(msg)
    if target.exists() and not os.access(target, os.W_OK):
        msg = (
            f"Received the {what} {str(target)!r}, which this user may not overwrite; "
            f"expected a writable file. Fix: pick another {option}."
        )
        raise AdaptiveRAGError(msg)
    _check_creatable(target, what, option)
    return target


def check_input_file(path: str | os.PathLike[str], *, what: str, option: str) -> Path:
    """Check that a file exists and can be read (its contents are checked by its reader).

    Args:
        path: The file.
        what: What it is, for the message (``"dataset file"``).
        option: The option that named it (``"--data"``).

    Returns:
        The path.

    Raises:
        AdaptiveRAGError: The file is missing, is a directory, or cannot be opened.
    """
    file = Path(path)
    if not file.is_file():
        kind = "a directory" if file.is_dir() else "missing"
        msg = (
            f"Received the {what} {str(file)!r}, which is {kind}; expected a file. Fix: "
            f"check the path given to {option}."
        )
        raise AdaptiveRAGError(msg)
    try:
        with file.open("rb") as handle:
            handle.read(1)
    except OSError as exc:
        msg = (
            f"Received the {what} {str(file)!r}, which cannot be read ({exc.strerror}); "
            f"expected a readable file. Fix: check its permissions, or copy it somewhere "
            f"readable and pass that to {option}."
        )
        raise AdaptiveRAGError(msg) from None
    return file
