"""Each family's capabilities, read from its tiny model, and the support matrix in the docs."""

from __future__ import annotations

from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM

from langchain_adaptive_rag.engine.capabilities import ModelCapabilities
from langchain_adaptive_rag.engine.window_masks import window_masks_of
from tests.helpers.families import FAMILIES

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "engine.md"
MATRIX_START = "<!-- support matrix: tests/integration_tests/engine/test_capabilities.py -->"


def _layers(indices: tuple[int, ...], count: int) -> str:
    if not indices:
        return "none"
    return "all" if len(indices) == count else ", ".join(str(i) for i in indices)


def matrix_row(family: str, capabilities: ModelCapabilities) -> list[str]:
    """The support matrix's row of one family, as the guide writes it."""
    c = capabilities
    window = {None: "always", 0: "never"}.get(c.window, f"within {c.window} positions")
    yes = {True: "yes", False: "no"}
    return [
        family,
        f"`{c.family}`",
        c.cache_kind,
        window,
        yes[c.shares_prompts],
        yes[c.masked_steps],
        _layers(c.attention_layers, c.num_layers),
        _layers(c.mlp_layers, c.num_layers),
    ]


def documented_rows() -> dict[str, list[str]]:
    """The guide's support matrix, by family."""
    lines = GUIDE.read_text(encoding="utf-8").splitlines()
    start = lines.index(MATRIX_START)
    rows: dict[str, list[str]] = {}
    for line in lines[start + 3 :]:  # the header and its rule come first
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells
    return rows


@pytest.mark.parametrize("family", FAMILIES)
def test_the_support_matrix_states_what_each_family_supports(
    family_dirs: dict[str, Path], family: str
) -> None:
    model = AutoModelForCausalLM.from_pretrained(family_dirs[family])
    assert documented_rows()[family] == matrix_row(family, ModelCapabilities.of(model))


def test_the_matrix_lists_every_family_once() -> None:
    assert sorted(documented_rows()) == sorted(FAMILIES)


def test_capabilities_are_read_once_per_model(family_dirs: dict[str, Path]) -> None:
    model = AutoModelForCausalLM.from_pretrained(family_dirs["mistral"])
    first = ModelCapabilities.of(model)
    assert ModelCapabilities.of(model) is first  # kept while the model lives
    assert first.joins and first.prefix_cache and not first.shares_prompts
    # the tiny Mistral's window is 16: the loop masks it, so any length fits
    assert first.window is None and first.fits(10_000)
    assert first.window_masks is not None and first.window_masks.window == 16
    model.config._attn_implementation = "flash_attention_2"  # a kernel that reads no mask
    assert window_masks_of(model) is None
