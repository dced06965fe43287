"""A GGUF file converted once to a transformers model directory.

transformers reads a GGUF file (``from_pretrained(folder, gguf_file=name)``, which needs
the ``gguf`` package) and dequantizes it, but refuses to save that model. The weights are
moved into a model built from the same configuration without its quantization entry,
which saves as safetensors and reloads in seconds. The directory is written under a
temporary name and renamed when complete; a ``conversion.json`` written last records
what it was made from and which files it holds, so a directory missing a file is
recognised as damaged.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from pathlib import Path

from langchain_adaptive_rag.engine.loading import weight_loading_bars
from langchain_adaptive_rag.pretrained.gguf_chunks import GGUFChunks, ModelCacheError

__all__ = ["MANIFEST", "check_converted", "convert_gguf"]

MANIFEST = "conversion.json"
"""The file a complete converted directory holds, written last."""


def check_converted(chunks: GGUFChunks, directory: Path, *, fix: str) -> None:
    """Fail unless ``directory`` is a complete conversion of ``chunks``' file.

    Args:
        chunks: The model the directory should hold.
        directory: The converted directory.
        fix: What the user should do when it is damaged.

    Raises:
        ModelCacheError: The manifest is missing, unreadable, of another file, or a
            file it lists is missing or of another size.
    """
    manifest = directory / MANIFEST
    try:
        record = json.loads(manifest.read_text(encoding="utf-8"))
        files: dict[str, int] = record["files"]
        source: str = record["gguf_sha256"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        msg = f"{directory} is not a complete model directory ({MANIFEST}: {exc}). Fix: {fix}."
        raise ModelCacheError(msg) from exc
    if source != chunks.sha256:
        msg = (
            f"{directory} was converted from a GGUF file with SHA-256 {source}; expected "
            f"{chunks.sha256} ({chunks.file_name}). Fix: {fix}."
        )
        raise ModelCacheError(msg)
    for name, size in files.items():
        path = directory / name
        found = path.stat().st_size if path.is_file() else None
        if found != size:
            got = "missing" if found is None else f"{found:,} bytes"
            msg = f"{path} is {got}; the conversion wrote {size:,} bytes. Fix: {fix}."
            raise ModelCacheError(msg)


def convert_gguf(chunks: GGUFChunks, gguf_path: Path, directory: Path) -> Path:
    """Convert ``gguf_path`` to a float32 transformers directory at ``directory``.

    Args:
        chunks: The model the file holds (recorded in the manifest).
        gguf_path: The checked GGUF file.
        directory: Where the model directory goes; it must not exist yet.

    Returns:
        ``directory``. When another process finished the same conversion first, its
        directory is kept and this one's is dropped.

    Raises:
        ModelCacheError: The ``gguf`` or ``accelerate`` package is missing.
    """
    for package in ("gguf", "accelerate"):  # transformers reads GGUF files through both
        if importlib.util.find_spec(package) is None:
            msg = (
                f"reading a GGUF file needs the {package} package, which is not installed. "
                'Fix: pip install "langchain-adaptive-rag[gemma]" (gguf and accelerate).'
            )
            raise ModelCacheError(msg)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    directory.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{directory.name}-", dir=directory.parent))
    scratch.chmod(0o755)  # mkdtemp's folder is private; the model directory is not
    try:
        folder, name = str(gguf_path.parent), gguf_path.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        with weight_loading_bars(shown=False):
            read = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
        settings = read.config.to_dict()
        settings.pop("quantization_config", None)
        config = AutoConfig.for_model(**settings)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(read.state_dict(), strict=True)
        model.generation_config = read.generation_config
        del read
        model.save_pretrained(scratch)
        tokenizer.save_pretrained(scratch)
        files = {p.name: p.stat().st_size for p in sorted(scratch.iterdir()) if p.is_file()}
        record = {"gguf": chunks.file_name, "gguf_sha256": chunks.sha256, "files": files}
        (scratch / MANIFEST).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        try:
            scratch.rename(directory)
        except OSError:
            if not (directory / MANIFEST).is_file():
                raise  # not another conversion's result: a real failure
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return directory
