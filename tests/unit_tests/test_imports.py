"""The public surface is explicit and stable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import langchain_adaptive_rag

ROOT = Path(__file__).resolve().parents[2]

EXPECTED_ALL = [
    "AdaptiveRAGConfig",
    "AVAILABLE_METHODS",
    "AdaptiveRAGError",
    "AttentionMatrix",
    "AttentionUnavailableError",
    "BM25Retriever",
    "CallCancelledError",
    "ChatTransformers",
    "DRAGINConfig",
    "ETCConfig",
    "CaptureOptions",
    "DecodingOptions",
    "Exemplar",
    "FLAREConfig",
    "IRCoTConfig",
    "FixLengthConfig",
    "FixSentenceConfig",
    "MethodConfig",
    "GenerationTrace",
    "HiddenLayerError",
    "ModelServerError",
    "PromptTooLongError",
    "QAPrompts",
    "RetrieverOptions",
    "SeaKRConfig",
    "SearchAgentConfig",
    "SearchProtocol",
    "SelfRAGConfig",
    "ServedModel",
    "TAAREConfig",
    "UncertaintyGateConfig",
    "ToolAgentConfig",
    "TokenSignals",
    "create_adaptive_rag_graph",
    "create_adaptive_rag_router_graph",
    "create_bm25_retriever",
    "create_dragin_graph",
    "create_etc_graph",
    "create_fix_length_graph",
    "create_fix_sentence_graph",
    "create_flare_graph",
    "create_ircot_graph",
    "create_no_retrieval_graph",
    "create_rag_tool",
    "create_seakr_graph",
    "create_search_agent_graph",
    "create_self_rag_graph",
    "create_single_round_graph",
    "create_ta_are_graph",
    "create_tool_agent_graph",
    "create_uncertainty_gate_graph",
    "create_vanilla_graph",
    "dataset_prompts",
    "get_token_signals",
    "load_bm25_retriever",
    "load_exemplars",
]


def test_all_imports() -> None:
    assert sorted(langchain_adaptive_rag.__all__) == sorted(EXPECTED_ALL)
    for name in EXPECTED_ALL:
        assert getattr(langchain_adaptive_rag, name) is not None


def test_docs_home_page_is_the_readme() -> None:
    """docs/index.md is the README with its links made relative to docs/ (one text)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text(encoding="utf-8")
    home = (root / "docs" / "index.md").read_text(encoding="utf-8")
    assert home == readme.replace("](docs/", "](")
    assert len(readme.splitlines()) <= 160
    for line in readme.splitlines():  # every page the README links exists
        for target in line.split("](docs/")[1:]:
            assert (root / "docs" / target.split(")")[0]).exists(), target


def test_the_package_does_not_import_the_training_code() -> None:
    """toyworld_training/ stays out of the wheel, so nothing the wheel ships may import it."""
    importing = re.compile(r"^\s*(from|import)\s+toyworld_training\b", re.MULTILINE)
    found = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "langchain_adaptive_rag").rglob("*.py"))
        if importing.search(path.read_text(encoding="utf-8"))
    ]
    assert not found


def test_the_command_line_starts_light_and_ctrl_c_while_loading_is_one_line() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    light = (
        "import sys, langchain_adaptive_rag, langchain_adaptive_rag.cli\n"
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", light], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
    # Ctrl-C while a command imports torch (the seconds after it starts)
    interrupted = (
        "import builtins, sys\n"
        "from langchain_adaptive_rag.cli import main\n"
        "real = builtins.__import__\n"
        "def importing(name, *args, **kwargs):\n"
        "    if name == 'torch':\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *args, **kwargs)\n"
        "builtins.__import__ = importing\n"
        "sys.exit(main(['signals']))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", interrupted], cwd=root, capture_output=True, text=True
    )
    assert run.returncode == 130
    assert run.stderr.strip() == "Interrupted (Ctrl-C)." and "Traceback" not in run.stderr


def test_every_module_imports_first() -> None:
    """No import cycle: each module of the package imports in a process that has none yet.

    One subprocess (so this session's modules stay as they are) forgets the package's
    modules before each import; torch and the other dependencies stay loaded.
    """
    script = """
import importlib, pkgutil, sys
import langchain_adaptive_rag as package
names = [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
failed = []
for name in names:
    for key in [k for k in sys.modules if k.split(".")[0] == "langchain_adaptive_rag"]:
        del sys.modules[key]
    try:
        importlib.import_module(name)
    except Exception as error:
        failed.append(f"{name}: {error!r}")
print(len(names))
print("\\n".join(failed))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    count, *failed = done.stdout.strip().splitlines()
    assert int(count) > 70  # every module was found, not only the package
    assert not failed


def test_docstrings_hold_no_raw_sphinx_roles() -> None:
    """mkdocstrings prints ``:func:`x``` literally: cross-references use autorefs' syntax."""
    role = re.compile(r":(?:func|class|meth|data|attr|mod|exc|obj|const):`")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / "langchain_adaptive_rag").rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if role.search(line)
    ]
    assert found == []


def test_returns_sections_start_without_a_colon() -> None:
    """Google style reads ``Returns: text: more`` as a type and a description: the
    rendered table would show "text" as the type. The first line holds no colon."""
    section = re.compile(r"^\s+(?:Returns|Yields):\s*$")
    found = [
        f"{path.relative_to(ROOT)}:{number + 1}"
        for path in sorted((ROOT / "langchain_adaptive_rag").rglob("*.py"))
        for lines in [path.read_text(encoding="utf-8").splitlines()]
        for number, line in enumerate(lines)
        if section.match(line) and ":" in lines[number + 1]
    ]
    assert found == []


def test_the_old_name_of_method_config_still_works_and_warns() -> None:
    import warnings

    from langchain_adaptive_rag.graphs import policy

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = policy.GenerationConfig
    assert old is policy.MethodConfig
    assert [w.category for w in caught] == [DeprecationWarning]
    assert "GenerationConfig is now MethodConfig" in str(caught[0].message)


def test_moved_modules_import_under_their_old_paths_and_warn() -> None:
    """Each old module path imports for one more release, naming its new path."""
    import importlib
    import warnings

    from langchain_adaptive_rag.lazy_exports import MOVED_MODULES

    for old, new in MOVED_MODULES.items():
        sys.modules.pop(old, None)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert [w.category for w in caught] == [DeprecationWarning], old
        assert f"moved to {new}" in str(caught[0].message)
        moved = importlib.import_module(new)
        assert module.__all__ == list(moved.__all__)
        for name in moved.__all__:
            assert getattr(module, name) is getattr(moved, name), (old, name)
        sys.modules.pop(old, None)
    assert importlib.import_module("langchain_adaptive_rag.graphs.policy").__name__ == (
        "langchain_adaptive_rag.graphs.policy"
    )
