"""Visualisation: recorded runs match their scripts; pictures and pages show the decisions."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pytest
from matplotlib.figure import Figure

from langchain_adaptive_rag.errors import AdaptiveRAGError
from langchain_adaptive_rag.graphs import AVAILABLE_METHODS, create_adaptive_rag_graph
from langchain_adaptive_rag.graphs.dragin import DRAGINConfig, create_dragin_graph
from langchain_adaptive_rag.graphs.fixed import create_fix_sentence_graph
from langchain_adaptive_rag.graphs.flare import create_flare_graph
from langchain_adaptive_rag.graphs.reflection import CONTROL_TOKENS
from langchain_adaptive_rag.graphs.seakr import create_seakr_graph
from langchain_adaptive_rag.testing import FakeTraceModel
from langchain_adaptive_rag.visualize import (
    RunRecord,
    draw_graph,
    graph_mermaid,
    record_run,
    report_html,
    timeline_figure,
    tokens_figure,
    tokens_html,
)
from tests.helpers import dragin_script, flare_script, seakr_script
from tests.helpers.agent_model import ScriptedAgentModel
from tests.helpers.scripted import NO_SHOTS, PASSAGES, QUESTION, RecordingRetriever

NODES = (
    "draft",
    "score_need",
    "formulate_query",
    "retrieve",
    "rerank",
    "continue_generation",
    "finalize",
)
DRAGIN_CONFIG = DRAGINConfig(query_top_n=3)


def _dragin_model() -> FakeTraceModel:
    return dragin_script.model(
        dragin_script.draft(), " Anna Berg was born in 1930. Extra.", " So the answer is 1930."
    )


@pytest.fixture(scope="module")
def dragin_record() -> RunRecord:
    model = _dragin_model()
    graph = create_dragin_graph(model, RecordingRetriever(), config=DRAGIN_CONFIG, prompts=NO_SHOTS)
    return record_run(graph, QUESTION, attention_model=model)


@pytest.fixture(scope="module")
def flare_record() -> RunRecord:
    model = FakeTraceModel(
        [flare_script.draft(), " Anna Berg was born in 1930. More.", " So the answer is 1930."]
    )
    graph = create_flare_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    return record_run(graph, QUESTION)


@pytest.fixture(scope="module")
def seakr_record() -> RunRecord:
    step, apart, same = seakr_script.step, seakr_script.APART, seakr_script.SAME
    script = [
        *step(" Blue Harbour was directed by Anna Berg. She", apart),
        *step(" The film is by Carl Lind. X", apart),
        *step(" The film was directed by Anna Berg. X", same),
        *step(" It is a film. X", apart),
        *step(" So the answer is 1931.", same),
        *step(seakr_script.RATIONALE, same),  # reading the rationale
        *step(" So the answer is 1930.", apart),  # reading the kept document
    ]
    graph = create_seakr_graph(
        FakeTraceModel(script),
        RecordingRetriever(),
        config=seakr_script.CONFIG,
        prompts=NO_SHOTS,
    )
    return record_run(graph, QUESTION)


# -- the record -----------------------------------------------------------------------------


def test_dragin_record_matches_the_script(dragin_record: RunRecord) -> None:
    record = dragin_record
    assert record.method == "dragin" and record.question == QUESTION
    assert record.answer == "1930"
    assert record.counts == {
        "retrievals": 1,
        "llm_calls": 3,
        "generated_tokens": 24,
        "rounds": 3,
        "retrieval_errors": 0,
        "prompt_tokens": 0,  # the fake's prompts carry no token ids
    }
    first, second = record.rounds
    assert [t.text for t in first.tokens] == list(dragin_script.DRAFT_TOKENS)
    assert [t.entropy for t in first.tokens] == pytest.approx([0.1] * 11 + [3.0])
    assert [t.probability for t in first.tokens] == [1.0] * 12
    # RIND comes from draft_words, mapped back onto each word's tokens
    a = 1.0 / np.arange(1, 13)
    expected = 5 * a[11] / a[7:12].sum() * 3.0
    assert first.tokens[11].rind == pytest.approx(expected)
    assert first.tokens[11].word == 11 and first.words[11].text == "1931."
    assert all(t.uncertainty is None for t in first.tokens)
    # reference attention of the uniform causal head: a(i) = 1 / (i + 1)
    assert [t.attention for t in first.tokens] == pytest.approx(list(a))
    decision = first.decision
    assert decision is not None and decision.retrieves
    assert decision.trigger_position == 11 and decision.trigger_word == "1931"
    assert decision.score == pytest.approx(expected) and decision.threshold == 1.0
    # reference mode (the DRAGIN code): the sentences before the trigger join the text with
    # the regenerated sentence, stripped and joined by single spaces
    assert first.accepted == ""
    assert first.retrieval is not None
    assert first.retrieval.query == "Anna Berg. born"
    assert first.retrieval.doc_ids == ["p0", "p1", "p2"]
    assert first.retrieval.doc_texts == PASSAGES
    assert first.retrieval.rerank_order is None
    text = "Blue Harbour was directed by Anna Berg. Anna Berg was born in 1930."
    assert first.continuation == text
    assert second.context == text
    assert second.accepted == " So the answer is 1930." and second.retrieval is None
    assert second.decision is not None and second.decision.route == "finalize"
    assert [e for e in record.events if e["event"] == "retrieval"] == [
        {
            "event": "retrieval",
            "query": "Anna Berg. born",
            "doc_ids": ["p0", "p1", "p2"],
            "doc_texts": PASSAGES,
            "doc_metadata": [{}, {}, {}],
            "note": "",
        }
    ]
    # each round's decision streams before what it leads to
    assert [(e["event"], e.get("retrieve")) for e in record.events] == [
        ("decision", True),
        ("retrieval", None),
        ("decision", False),
    ]


def test_flare_record_matches_the_script(flare_record: RunRecord) -> None:
    first = flare_record.rounds[0]
    probs = [0.9, 0.9, 0.8, 0.9, 0.7, 0.9, 0.9, 0.9, 0.35, 0.9, 0.1]
    assert [t.probability for t in first.tokens] == pytest.approx(probs)
    assert all(t.rind is None and t.word is None for t in first.tokens)
    assert first.decision is not None
    assert first.decision.trigger_position == 10 and first.decision.trigger_word == "1931"
    assert first.decision.score == pytest.approx(0.1) and first.decision.threshold == 0.4
    assert first.accepted == " It was directed by Anna Berg."
    assert first.retrieval is not None and first.retrieval.query == "She was in"


def test_seakr_record_matches_the_script(seakr_record: RunRecord) -> None:
    first = seakr_record.rounds[0]
    assert first.uncertainty == pytest.approx(seakr_script.U_APART, abs=1e-5)  # float32 U
    assert all(t.uncertainty == first.uncertainty for t in first.tokens)
    assert all(t.entropy is not None for t in first.tokens)  # the greedy step's entropies
    assert first.decision is not None and first.decision.threshold == -2.0
    assert first.retrieval is not None and first.retrieval.rerank_order == [1]
    assert first.retrieval.query == "Blue Harbour directed Anna Berg"
    assert first.continuation == " The film was directed by Anna Berg."
    assert seakr_record.rounds[1].uncertainty == pytest.approx(seakr_script.U_SAME, abs=1e-5)


def test_fixed_schedule_record_has_no_scores() -> None:
    model = FakeTraceModel([" Anna Berg was born in 1931. More.", " So the answer is 1931."])
    graph = create_fix_sentence_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    record = record_run(graph, QUESTION)
    assert [r.retrieval.query for r in record.rounds if r.retrieval] == [
        QUESTION,
        "Anna Berg was born in 1931.",
    ]
    assert all(r.tokens == [] and r.decision and r.decision.score is None for r in record.rounds)
    assert isinstance(timeline_figure(record), Figure)
    assert "Fixed schedule" in tokens_html(record)


def test_record_json_round_trips(dragin_record: RunRecord, seakr_record: RunRecord) -> None:
    for record in (dragin_record, seakr_record):
        assert RunRecord.from_json(record.to_json()) == record
        assert RunRecord.from_json(record.to_json(indent=2)) == record


def test_repr_is_one_readable_line(dragin_record: RunRecord) -> None:
    shown = repr(dragin_record)
    assert "\n" not in shown and "TokenRecord" not in shown and len(shown) < 400
    assert f"answer={dragin_record.answer!r}" in shown
    rounds, retrieved = len(dragin_record.rounds), len(dragin_record.retrievals)
    assert f"recorded_rounds={rounds} ({retrieved} retrieved)" in shown


def test_bad_input_is_named() -> None:
    with pytest.raises(AdaptiveRAGError, match="Expected a compiled LangGraph graph"):
        record_run("dragin", QUESTION)  # type: ignore[arg-type]
    with pytest.raises(AdaptiveRAGError, match="not JSON"):
        RunRecord.from_json("{oops")
    with pytest.raises(AdaptiveRAGError, match=r"received keys \['question'\]"):
        RunRecord.from_json('{"question": "q"}')


# -- HTML -----------------------------------------------------------------------------------


def _trigger_group(page: str) -> str:
    """The text inside the first trigger outline of a draft."""
    start = page.index('<span class="arag-trigger">', page.index('class="arag-draft"'))
    depth, position = 0, start
    for tag in re.finditer(r"<(/?)span\b[^>]*>", page[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            position = start + tag.end()
            break
    return re.sub(r"<[^>]+>", "", page[start:position])


def test_html_marks_trigger_threshold_and_query(dragin_record: RunRecord) -> None:
    page = tokens_html(dragin_record, "rind")
    assert _trigger_group(page) == "1931."
    assert "threshold θ = 1" in page
    assert "RIND s(w) = 2.449 &gt; threshold θ = 1" in page
    # the query "Anna Berg. born": highlighted in the question and the answer so far
    assert '<mark class="arag-q">born?</mark>' in page
    assert 'directed by <mark class="arag-q">Anna</mark> <mark class="arag-q">Berg.</mark>' in page
    assert '<span class="arag-inq">Anna</span>' in page
    assert '<span class="arag-inq">directed</span>' not in page
    # passages listed in retriever order; the tooltip carries every value
    assert page.index("p0</code>") < page.index("p1</code>") < page.index("p2</code>")
    assert "used (retriever order)" in page
    assert "RIND = 2.449" in page and "a = 0.083" in page
    assert dragin_record._repr_html_() == page  # notebooks show the method's signal


def test_html_of_flare_and_seakr(flare_record: RunRecord, seakr_record: RunRecord) -> None:
    flare = tokens_html(flare_record, "probability")
    assert _trigger_group(flare) == "born"  # the first of the two tokens under theta
    assert "probability p = 0.100 &lt; threshold θ = 0.4" in flare
    seakr = tokens_html(seakr_record, "uncertainty")
    assert "threshold δ = -2" in seakr
    assert "kept, re-rank #1" in seakr and seakr.count("dropped by the re-ranker") == 2
    # SeaKR's trigger is the whole step: one outline around all its tokens
    assert _trigger_group(seakr).startswith("Blue Harbour was directed by Anna Berg")


def test_unknown_signal_is_refused(dragin_record: RunRecord) -> None:
    with pytest.raises(AdaptiveRAGError, match=r"Unknown signal 'logits'\. Expected one of"):
        tokens_html(dragin_record, "logits")  # type: ignore[arg-type]
    with pytest.raises(AdaptiveRAGError, match="Expected a RunRecord"):
        tokens_html({"question": QUESTION}, "rind")  # type: ignore[arg-type]


def test_html_colours_are_matplotlibs(dragin_record: RunRecord) -> None:
    """The views' own colour maps (no matplotlib needed) colour exactly as matplotlib's."""
    from matplotlib.colors import Normalize, to_hex

    from langchain_adaptive_rag.visualize._colours import COLORMAP_NAMES, colormap_hex
    from langchain_adaptive_rag.visualize._style import SPECS, scale_for

    assert {spec.cmap for spec in SPECS.values()} <= set(COLORMAP_NAMES)
    grid = [*np.linspace(-0.1, 1.1, 2401), *(i / 256 for i in range(257)), -1e-12, 1 - 1e-12]
    for name in COLORMAP_NAMES:
        cmap = mpl.colormaps[name]
        assert [colormap_hex(name, x) for x in grid] == [to_hex(cmap(x)) for x in grid], name
    for signal in ("entropy", "probability", "rind", "attention"):
        scale = scale_for(dragin_record, signal)
        norm, cmap = Normalize(scale.lo, scale.hi), mpl.colormaps[SPECS[signal].cmap]
        values = [scale.lo + (scale.hi - scale.lo) * k / 97 for k in range(-5, 103)]
        assert [scale.colour(v) for v in values] == [to_hex(cmap(norm(v))) for v in values]


def test_report_page_is_self_contained(
    dragin_record: RunRecord, flare_record: RunRecord, seakr_record: RunRecord
) -> None:
    table = "| method | answer |\n|---|---|\n| dragin | 1930 |"
    page = report_html(
        [dragin_record, flare_record, seakr_record],
        title="Three methods",
        summary_table_markdown=table,
    )
    assert page.startswith("<!DOCTYPE html>") and "<title>Three methods</title>" in page
    assert "<th>method</th>" in page and "<td>dragin</td>" in page
    assert page.count("data:image/png;base64,") == 6  # a timeline and a token strip per run
    # runs are headed by the papers' names of their methods, not their ids
    assert '<a href="#run-0">DRAGIN: ' in page and "<h2>3. SeaKR: " in page
    assert "<b>FLARE</b>" in page and "<b>flare</b>" not in page
    assert "http://" not in page and "https://" not in page and "<script" not in page
    with pytest.raises(AdaptiveRAGError, match="Expected a list of RunRecords"):
        report_html(dragin_record, title="x")  # type: ignore[arg-type]


# -- pictures -------------------------------------------------------------------------------


def test_token_and_timeline_figures(
    dragin_record: RunRecord, seakr_record: RunRecord, tmp_path: Path
) -> None:
    for signal in ("entropy", "probability", "rind", "attention", "uncertainty"):
        fig = tokens_figure(dragin_record, signal)
        assert isinstance(fig, Figure)
    path = tmp_path / "tokens.png"
    tokens_figure(seakr_record, "uncertainty").savefig(path)
    timeline_figure(dragin_record).savefig(tmp_path / "timeline.png")
    for name in ("tokens.png", "timeline.png"):
        data = (tmp_path / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_graph_pictures_offline(tmp_path: Path) -> None:
    graph = create_dragin_graph(_dragin_model(), RecordingRetriever())
    fonttype = mpl.rcParams["svg.fonttype"]
    png = draw_graph(graph, tmp_path / "dragin.png")
    svg = draw_graph(graph, tmp_path / "dragin.svg")
    mmd = draw_graph(graph, tmp_path / "dragin.mmd")
    assert mpl.rcParams["svg.fonttype"] == fonttype  # no global setting changed
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
    text = svg.read_text(encoding="utf-8")
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    mermaid = graph_mermaid(graph)
    assert mmd.read_text(encoding="utf-8") == mermaid
    for node in (*NODES, "__start__", "__end__"):
        assert f">{node}<" in text or f"> {node}<" in text or node in text
        assert re.search(rf"\b{node}\b", mermaid)
    for path_name in ("formulate_query", "continue_generation", "finalize", "draft"):
        assert text.count(path_name) >= 2  # the node and the router path labelling an edge
    with pytest.raises(AdaptiveRAGError, match=r"Expected one of \.png, \.svg, \.mmd"):
        draw_graph(graph, tmp_path / "dragin.jpg")


def test_scores_are_finite_or_none(seakr_record: RunRecord) -> None:
    values = [t.uncertainty for r in seakr_record.rounds for t in r.tokens]
    assert all(v is None or math.isfinite(v) for v in values)


NODES = (
    "draft",
    "score_need",
    "formulate_query",
    "retrieve",
    "rerank",
    "continue_generation",
    "finalize",
)


@pytest.mark.parametrize("method", AVAILABLE_METHODS)
def test_every_method_is_drawn_offline(method: str, tmp_path: Path) -> None:
    reflection = {token: 1000 + i for i, token in enumerate(CONTROL_TOKENS)}
    model: Any = FakeTraceModel([], vocabulary=reflection if method == "self_rag" else None)
    if method == "tool_agent":
        model = ScriptedAgentModel(replies=[])
    graph = create_adaptive_rag_graph(model, RecordingRetriever(), method)
    png = draw_graph(graph, tmp_path / f"{method}.png")
    svg = draw_graph(graph, tmp_path / f"{method}.svg").read_text(encoding="utf-8")
    mermaid = draw_graph(graph, tmp_path / f"{method}.mmd").read_text(encoding="utf-8")
    assert png.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and png.stat().st_size > 20_000
    if method == "adaptive_rag":  # the picture: the router; the mermaid text: every route's nodes
        for node in ("classify", "no_retrieval", "single_round", "ircot", "tally"):
            assert node in svg
        for route in ("no_retrieval", "single_round", "ircot"):
            assert f"subgraph {route}" in mermaid
            assert all(f"{route}\\3a{node}({node})" in mermaid for node in NODES)
        return
    if method == "tool_agent":  # the agent node (create_agent's loop) and finalize
        assert all(node in svg and node in mermaid for node in ("agent", "finalize"))
        return
    for node in NODES:
        assert node in svg and node in mermaid


@pytest.mark.parametrize("mode", ["reference", "paper"])
def test_the_event_the_heat_map_and_the_report_name_the_same_trigger_and_score(
    mode: str,
) -> None:
    from langchain_adaptive_rag.testing import ScriptedResponse
    from langchain_adaptive_rag.visualize import report_html
    from langchain_adaptive_rag.visualize._style import trigger_tokens

    # the second sentence has two words over theta: "born" first, "1931." higher
    entropies = (0.1,) * 9 + (4.0, 0.1, 6.0)
    tokens = dragin_script.DRAFT_TOKENS
    draft = ScriptedResponse("".join(tokens), tokens=tokens, entropies=entropies)
    model = dragin_script.model(draft, " So the answer is 1930.", " So the answer is 1930.")
    config = DRAGINConfig(mode=mode, theta=0.5)  # type: ignore[arg-type]
    graph = create_dragin_graph(model, RecordingRetriever(), config=config, prompts=NO_SHOTS)
    record = record_run(graph, QUESTION, attention_model=model)
    (event,) = [e for e in record.events if e["event"] == "decision" and e["retrieve"]]
    decision = record.rounds[0].decision
    assert decision is not None
    # the event and the record agree, and name the first word over theta with its own s(w)
    assert (event["trigger_word"], event["score"]) == (decision.trigger_word, decision.score)
    assert event["trigger_word"] == "born" and event["trigger_words"] == ["born", "1931"]
    assert (event["signal"], event["direction"]) == ("rind", "above")
    round_ = record.rounds[0]
    assert round_.tokens[decision.trigger_position].rind == pytest.approx(decision.score)
    # the heat-map outlines exactly the words over theta, and no other token
    outlined = trigger_tokens(round_)
    over = {i for i, t in enumerate(round_.tokens) if t.rind is not None and t.rind > 0.5}
    assert outlined == over == {9, 11}
    # the HTML view and the report say the same trigger, score and rule
    said = f"Trigger: token #9 <code>born</code>; RIND s(w) = {decision.score:.3f} &gt;"
    page = tokens_html(record, "rind")
    assert said in page and "the first sentence that has a word with RIND" in page
    assert said in report_html([record], title="t")


def test_flare_s_event_heat_map_and_report_name_the_same_trigger_and_score() -> None:
    from langchain_adaptive_rag.graphs.flare import create_flare_graph
    from langchain_adaptive_rag.visualize import report_html
    from langchain_adaptive_rag.visualize._style import trigger_tokens
    from tests.helpers import flare_script

    model = FakeTraceModel(
        [flare_script.draft(), " Anna Berg was born in 1930.", " So the answer is 1930."]
    )
    graph = create_flare_graph(model, RecordingRetriever(), prompts=NO_SHOTS)
    record = record_run(graph, QUESTION)
    (event,) = [e for e in record.events if e["event"] == "decision" and e["retrieve"]]
    round_ = record.rounds[0]
    decision = round_.decision
    assert decision is not None
    # the least probable token, bare of its period, with its own probability
    assert (event["trigger_word"], event["score"]) == (decision.trigger_word, decision.score)
    assert event["trigger_word"] == "1931" and event["trigger_words"] == ["born", "1931"]
    assert (event["signal"], event["direction"]) == ("probability", "below")
    assert round_.tokens[decision.trigger_position].probability == pytest.approx(decision.score)
    # the heat-map outlines exactly the tokens under theta in the uncertain sentence
    over = {
        i for i, t in enumerate(round_.tokens) if t.probability is not None and t.probability < 0.4
    }
    assert trigger_tokens(round_) == over == {8, 10}
    said = f"Trigger: token #10 <code>1931</code>; probability p = {decision.score:.3f} &lt;"
    page = tokens_html(record, "probability")
    assert said in page and "the first sentence that has a token with probability under" in page
    assert said in report_html([record], title="t")


def test_seakr_s_event_heat_map_and_report_name_the_same_step_and_score(
    seakr_record: RunRecord,
) -> None:
    from langchain_adaptive_rag.visualize import report_html
    from langchain_adaptive_rag.visualize._style import trigger_tokens

    (event,) = [e for e in seakr_record.events if e["event"] == "decision" and e["retrieve"]]
    round_ = next(r for r in seakr_record.rounds if r.decision and r.decision.retrieves)
    decision = round_.decision
    assert decision is not None
    # the trigger is the whole greedy step, its score that step's U
    assert (event["trigger_word"], event["score"]) == (decision.trigger_word, decision.score)
    assert decision.trigger_word == "Blue Harbour was directed by Anna Berg."
    assert (event["signal"], event["direction"]) == ("uncertainty", "above")
    assert decision.score is not None and decision.threshold is not None
    assert decision.score > decision.threshold and round_.uncertainty == decision.score
    # the heat-map outlines the step's tokens, and only them
    outlined = "".join(round_.tokens[i].text for i in sorted(trigger_tokens(round_)))
    assert outlined.strip() == decision.trigger_word.rstrip(".")  # the stop cut its period
    page = tokens_html(seakr_record, "uncertainty")
    said = f"U = {decision.score:.3f} &gt; threshold δ = {decision.threshold:g}"
    assert said in page and said in report_html([seakr_record], title="t")
    assert "SeaKR retrieves" in page  # the rule in words
