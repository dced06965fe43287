"""Every integer field of every toy-world method at 10**9, under a memory cap and a time
limit: each is refused with a clear error or the run ends normally, never allocating
without bound (``tests/helpers/config_fuzz.py`` runs them in a process of its own)."""

from __future__ import annotations

import json
import subprocess
import sys

from langchain_adaptive_rag.toyworld.comparison import TOY_METHODS

CLEAR = ("must be", "must fit", "does not exist")
"""What a clear error says: the field's range, the model's context, a layer index."""


def test_huge_values_end_in_a_clear_error_or_a_normal_run() -> None:
    command = [sys.executable, "-m", "tests.helpers.config_fuzz", ",".join(TOY_METHODS)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert {r["method"] for r in results} == set(TOY_METHODS)
    for result in results:
        outcome, message = result["outcome"], result["message"]
        clear = outcome == "error" and any(words in message for words in CLEAR)
        assert clear or outcome == "ran", result
        assert result["seconds"] < 30, result  # no run grinds on
    # the field and the limit are named for the counts
    seakr = next(r for r in results if r["method"] == "seakr" and r["field"] == "num_samples")
    assert "SeaKRConfig.num_samples must be at most 256" in seakr["message"]
