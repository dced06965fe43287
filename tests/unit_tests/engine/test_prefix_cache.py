"""The prefix cache's store (longest match, superseding, LRU under a byte budget) and the
prefill pass grouping, on hand-computed values."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_adaptive_rag import AdaptiveRAGError
from langchain_adaptive_rag.engine.prefill import prefill_groups
from langchain_adaptive_rag.engine.prefix_cache import LayerStates, PrefixCache

CPU = torch.device("cpu")
TOKEN_BYTES = 2 * 2 * 3 * 4  # two layers, keys and values, 3 features of 4 bytes


def states(ids: list[int]) -> LayerStates:
    """Two layers whose states at each token are its id (so slices can be checked)."""
    column = torch.tensor(ids, dtype=torch.float32).reshape(1, 1, -1, 1).expand(1, 1, -1, 3)
    return [(column.clone(), -column.clone()) for _ in range(2)]


def test_match_takes_the_longest_shared_prefix_and_leaves_the_last_token() -> None:
    cache = PrefixCache(10**6, min_tokens=2)
    cache.add([1, 2, 3, 4, 5], lambda: states([1, 2, 3, 4, 5]))
    cache.add([1, 2, 9, 9], lambda: states([1, 2, 9, 9]))
    length, entry = cache.match([1, 2, 3, 4, 7, 8], CPU)
    assert length == 4 and entry is not None and entry.ids.tolist() == [1, 2, 3, 4, 5]
    assert entry.layers[0][0][0, 0, :length, 0].tolist() == [1, 2, 3, 4]
    length, _ = cache.match([1, 2, 3, 4, 5], CPU)  # the same prompt: its last token is fed
    assert length == 4
    assert cache.match([1, 7, 7], CPU) == (0, None)  # 1 shared token < min_tokens
    assert cache.match([5, 5], CPU) == (0, None)
    assert cache.stats.prompts == 4 and cache.stats.hits == 2
    assert cache.stats.prompt_tokens == 6 + 5 + 3 + 2 and cache.stats.reused_tokens == 8
    assert cache.stats.reused_share == pytest.approx(8 / 16)


def test_a_longer_prompt_replaces_its_prefixes_and_a_held_prompt_is_not_copied() -> None:
    cache = PrefixCache(10**6, min_tokens=2)
    cache.add([1, 2, 3], lambda: states([1, 2, 3]))
    cache.add([1, 2, 3, 4], lambda: states([1, 2, 3, 4]))
    assert len(cache) == 1 and cache.nbytes == 4 * TOKEN_BYTES

    def fail() -> LayerStates:
        raise AssertionError("a prompt a stored one holds is not copied")

    cache.add([1, 2], fail)
    cache.add([1, 2, 3, 4], fail)
    assert len(cache) == 1


def test_least_recently_used_prompts_leave_first_within_the_byte_budget() -> None:
    cache = PrefixCache(10 * TOKEN_BYTES, min_tokens=2)
    cache.add([1, 1, 1, 1], lambda: states([1, 1, 1, 1]))
    cache.add([2, 2, 2, 2], lambda: states([2, 2, 2, 2]))
    assert cache.match([1, 1, 1, 5], CPU)[0] == 3  # [1, ...] is now the most recent
    cache.add([3, 3, 3, 3], lambda: states([3, 3, 3, 3]))  # 12 tokens > 10: [2, ...] leaves
    assert cache.nbytes == 8 * TOKEN_BYTES and len(cache) == 2
    assert cache.match([2, 2, 2, 2], CPU) == (0, None)
    assert cache.match([1, 1, 1, 1], CPU)[0] == 3
    cache.add(list(range(11)), lambda: states(list(range(11))))  # larger than the budget
    assert len(cache) == 2 and cache.nbytes == 8 * TOKEN_BYTES
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0


def test_short_prompts_and_a_zero_budget_store_nothing() -> None:
    cache = PrefixCache(10**6, min_tokens=4)
    cache.add([1, 2, 3], lambda: states([1, 2, 3]))
    assert len(cache) == 0
    off = PrefixCache(0, min_tokens=1)
    off.add([1, 2, 3], lambda: states([1, 2, 3]))
    assert len(off) == 0


def test_entries_on_another_device_are_dropped() -> None:
    cache = PrefixCache(10**6, min_tokens=2)
    cache.add([1, 2, 3, 4], lambda: states([1, 2, 3, 4]))
    assert cache.match([1, 2, 3, 4, 5], torch.device("meta")) == (0, None)  # model moved
    assert len(cache) == 0


@pytest.mark.parametrize(
    ("max_bytes", "min_tokens", "named"),
    [(-1, 16, "max_bytes must be >= 0, got -1"), (10, 0, "min_tokens must be >= 1, got 0")],
)
def test_bad_settings_are_named(max_bytes: int, min_tokens: int, named: str) -> None:
    with pytest.raises(AdaptiveRAGError, match=named):
        PrefixCache(max_bytes, min_tokens=min_tokens)


def test_prefill_groups_split_only_where_padding_costs_more_than_a_pass() -> None:
    # one pass: 3 x 100 + 128 = 428; any split adds 128 and saves nothing
    assert prefill_groups([100, 100, 100]) == [[0, 1, 2]]
    # one pass: 4 x 300 + 128 = 1328; {0, 2} and {1, 3}: 2 x 300 + 2 x 20 + 256 = 896
    assert prefill_groups([300, 20, 290, 10]) == [[0, 2], [1, 3]]
    # 2 x 300 + 128 = 728 alone; split: 300 + 200 + 256 = 756: kept together
    assert prefill_groups([300, 200]) == [[0, 1]]
    assert prefill_groups([300, 200], pass_tokens=10) == [[0], [1]]
    assert prefill_groups([5]) == [[0]]


def _cost(groups: list[list[int]], needs: list[int], pass_tokens: int) -> int:
    return sum(len(g) * max(needs[i] for i in g) + pass_tokens for g in groups)


def _partitions(items: list[int]) -> list[list[list[int]]]:
    if not items:
        return [[]]
    first, rest = items[0], items[1:]
    result = []
    for partition in _partitions(rest):
        result.append([[first], *partition])
        for k in range(len(partition)):
            result.append([*partition[:k], [first, *partition[k]], *partition[k + 1 :]])
    return result


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 400), min_size=1, max_size=6),
    st.integers(0, 300),
)
def test_prefill_groups_cost_the_least_of_every_partition(
    needs: list[int], pass_tokens: int
) -> None:
    groups = prefill_groups(needs, pass_tokens)
    assert sorted(itertools.chain(*groups)) == list(range(len(needs)))
    best = min(_cost(p, needs, pass_tokens) for p in _partitions(list(range(len(needs)))))
    assert _cost(groups, needs, pass_tokens) == best
