"""The layers of ARCHITECTURE.md, checked on the source: every import statement of a module
(those inside functions too), parsed with ``ast`` and resolved to an absolute module name.

- ``rnngraph/ir.py`` and the op registry (``rnngraph/ops.py`` and the modules it is made of,
  ``ops_registry.py``, ``ops_losses.py`` and ``ops_lsh.py``: what a graph is) import nothing of rnngraph but each
  other and ``rnngraph.errors``; ``rnngraph/schedule_options.py`` nothing of rnngraph;
- ``rnngraph/passes/`` imports nothing from ``rnngraph.codegen`` (the code generator takes the
  schedule and a LoopTuning; the passes take ScheduleOptions) nor from the API modules above it,
  where ``RNNGRAPH_LOOP`` is read (``rnngraph/loop_env.py``);
- ``rnngraph/codegen/`` imports nothing from the network API or the modules above it (dropout
  masks come from ``rnngraph/masks.py``);
- ``rnngraph/lsh/`` (the NumPy LSH output layer) imports nothing of rnngraph but itself and
  ``rnngraph.errors``: the GPU kernels and the head will build on it, not it on them;
- no module outside the package ``rnngraph/trace/`` uses a private name (a leading underscore)
  of it or of one of its modules, imported or as an attribute: the layers trace through its
  public ``Builder`` and ``tracing``; its own modules share those names.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rnngraph"
#: modules above the passes: the code generator, the backends and the API
ABOVE_PASSES = ("rnngraph.codegen", "rnngraph.executor", "rnngraph.reference", "rnngraph.runtime", "rnngraph.layer",
                "rnngraph.torch", "rnngraph.cli", "rnngraph.lm", "rnngraph.bench", "rnngraph.loop_env",
                "rnngraph.data", "rnngraph.schedule_export", "rnngraph.step_cuda", "rnngraph.step_host",
                "rnngraph.step_feed", "rnngraph.step_state")

#: what the code generator must not import: the network API and what is built on the generator
ABOVE_CODEGEN = ("rnngraph.network", "rnngraph.runtime", "rnngraph.step_cuda", "rnngraph.step_host",
                 "rnngraph.step_feed", "rnngraph.step_state", "rnngraph.layer", "rnngraph.torch", "rnngraph.cli",
                 "rnngraph.lm")
TRACE = "rnngraph.trace"
#: the trace package and its modules, by their absolute names
TRACE_MODULES = {TRACE} | {f"{TRACE}.{p.stem}" for p in (PACKAGE / "trace").glob("*.py") if p.stem != "__init__"}
#: every Python file of the repository but the trace package's own
SOURCES = sorted(p for top in ("rnngraph", "tests", "bench", "examples", "scripts")
                 for p in (PACKAGE.parent / top).rglob("*.py") if not p.is_relative_to(PACKAGE / "trace"))


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, module: str, is_package: bool = False) -> set[str]:
    """The absolute names of the modules ``source`` (the text of ``module``) imports, anywhere in
    it; ``from X import name`` counts as both X and X.name (name may be a submodule)."""
    package = module if is_package else module.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module
            out.add(target)
            out.update(f"{target}.{alias.name}" for alias in node.names)
    return out


def is_private_trace_name(name: str) -> bool:
    """Whether ``name`` (absolute, dotted) is in the trace package and has a private part."""
    return under(name, (TRACE,)) and any(part.startswith("_") for part in name[len(TRACE) + 1:].split("."))


def private_trace_uses(source: str, module: str, is_package: bool = False) -> set[str]:
    """The private names of the rnngraph.trace package or of its modules that ``source`` uses:
    imported (``from .trace import _Builder``, ``from .trace.active import _ACTIVE``) or read as an
    attribute of one of those modules (``trace._ACTIVE``, ``rnngraph.trace.active._ACTIVE``, an
    alias of the module included), as absolute names (``rnngraph.trace.active._ACTIVE``)."""
    found = {m for m in imports(source, module, is_package) if is_private_trace_name(m)}
    package = module if is_package else module.rpartition(".")[0]
    tree = ast.parse(source)
    aliases = {m: m for m in TRACE_MODULES}  # expression -> the module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases.update((a.asname, a.name) for a in node.names if a.name in TRACE_MODULES and a.asname)
        elif isinstance(node, ast.ImportFrom):
            base = node.module
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            aliases.update((a.asname or a.name, f"{base}.{a.name}") for a in node.names
                           if f"{base}.{a.name}" in TRACE_MODULES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and ast.unparse(node.value) in aliases:
            found.add(f"{aliases[ast.unparse(node.value)]}.{node.attr}")
    return found


def rnngraph_imports(path: Path) -> set[str]:
    found = imports(path.read_text(encoding="utf-8"), module_name(path), path.name == "__init__.py")
    return {m for m in found if m == "rnngraph" or m.startswith("rnngraph.")}


def under(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_the_checker_sees_relative_imports_inside_functions():
    """The import the passes had before options were values: inside a function, relative."""
    src = "def f(streams):\n    from ..codegen.tuning import loop_tuning\n    return loop_tuning(streams)\n"
    assert "rnngraph.codegen.tuning" in imports(src, "rnngraph.passes.pipeline")
    assert imports("from .. import ops\nfrom .plan import Plan\n", "rnngraph.passes.lower") >= {
        "rnngraph.ops", "rnngraph.passes.plan"}
    assert imports("from .fuse import fuse\n", "rnngraph.passes", is_package=True) >= {"rnngraph.passes.fuse"}


@pytest.mark.parametrize("path", sorted((PACKAGE / "passes").glob("*.py")), ids=lambda p: p.name)
def test_passes_import_nothing_above_them(path):
    bad = sorted(m for m in rnngraph_imports(path) if under(m, ABOVE_PASSES))
    assert bad == [], f"{path.name} imports {bad}: pass values (ScheduleOptions) down instead"


#: what the op registry's modules may import: each other (ops.py re-exports the machinery of
#: ops_registry.py and imports the loss ops of ops_losses.py and ops_lsh.py), ir.py and errors.py
REGISTRY_BELOW = ("rnngraph.errors", "rnngraph.ir", "rnngraph.ops_registry", "rnngraph.ops_losses", "rnngraph.ops_lsh")


@pytest.mark.parametrize("name, allowed", [("ir.py", ("rnngraph.errors",)),
                                           ("ops.py", REGISTRY_BELOW),
                                           ("ops_registry.py", ("rnngraph.errors", "rnngraph.ir")),
                                           ("ops_losses.py", ("rnngraph.errors", "rnngraph.ir",
                                                              "rnngraph.ops_registry")),
                                           ("ops_lsh.py", ("rnngraph.errors", "rnngraph.ir", "rnngraph.ops_registry",
                                                           "rnngraph.ops_losses")),
                                           ("schedule_options.py", ())])
def test_the_bottom_layer_imports_nothing_above_it(name, allowed):
    bad = sorted(m for m in rnngraph_imports(PACKAGE / name) if not under(m, allowed))
    assert bad == [], f"{name} imports {bad}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "codegen").glob("*.py")), ids=lambda p: p.name)
def test_codegen_imports_nothing_of_the_network_api_or_above(path):
    bad = sorted(m for m in rnngraph_imports(path) if under(m, ABOVE_CODEGEN))
    assert bad == [], f"codegen/{path.name} imports {bad}: move what it needs below (as rnngraph/masks.py)"


@pytest.mark.parametrize("path", sorted((PACKAGE / "lsh").glob("*.py")), ids=lambda p: p.name)
def test_lsh_imports_nothing_but_itself_and_the_errors(path):
    bad = sorted(m for m in rnngraph_imports(path) if not under(m, ("rnngraph.lsh", "rnngraph.errors")))
    assert bad == [], f"lsh/{path.name} imports {bad}"


def test_the_checker_sees_private_trace_names_imported_and_read():
    assert private_trace_uses("from .trace import Cell, _ACTIVE\n", "rnngraph.network") == {"rnngraph.trace._ACTIVE"}
    assert private_trace_uses("from . import trace as t\nt._Builder('n')\n", "rnngraph.heads") == {
        "rnngraph.trace._Builder"}
    assert private_trace_uses("def f():\n    from ..trace import _builder\n", "rnngraph.codegen.step") == {
        "rnngraph.trace._builder"}
    assert private_trace_uses("import rnngraph.trace\nrnngraph.trace._ACTIVE.pop()\n", "test_x") == {
        "rnngraph.trace._ACTIVE"}
    assert private_trace_uses("from rnngraph.trace import Builder, tracing\nx._ACTIVE\n", "test_x") == set()
    # the package's modules
    assert private_trace_uses("from .trace.active import _ACTIVE\n", "rnngraph.network") == {
        "rnngraph.trace.active._ACTIVE"}
    assert private_trace_uses("from .trace import builder\nbuilder._Pending\n", "rnngraph.heads") == {
        "rnngraph.trace.builder._Pending"}
    assert private_trace_uses("import rnngraph.trace.value as v\nv._value(x, 'f')\n", "test_x") == {
        "rnngraph.trace.value._value"}
    assert private_trace_uses("rnngraph.trace.active._ACTIVE.pop()\n", "test_x") == {"rnngraph.trace.active._ACTIVE"}
    assert private_trace_uses("from rnngraph.trace.builder import Builder\nBuilder._x\n", "test_x") == set()


def test_nothing_outside_trace_uses_its_private_names():
    bad = {}
    for path in SOURCES:
        module = module_name(path) if path.is_relative_to(PACKAGE) else path.stem
        found = private_trace_uses(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")
        if found:
            bad[str(path.relative_to(PACKAGE.parent))] = sorted(found)
    assert len(SOURCES) > 100 and bad == {}, f"{bad}: use rnngraph.trace's public Builder and tracing"


#: where a row reduction's op name may be written: its registry entry (ops.py), the table of its
#: CUDA pieces (codegen/row_reductions.py), and the user API that builds its nodes (the function in
#: trace/functions.py, exported by trace/__init__.py and __init__.py, listed by cell_api.py)
ROW_NAME_HOMES = ("ops.py", "codegen/row_reductions.py", "trace/functions.py", "trace/__init__.py", "__init__.py",
                  "cell_api.py")


def row_reduction_names() -> set[str]:
    from rnngraph import ops
    return {name for name, op in ops.REGISTRY.items() if op.kind == "row_reduction"}


def name_literals(source: str, names) -> list[tuple[int, bool]]:
    """(line, in a comparison) of each string literal of ``source`` equal to one of ``names``; in
    a comparison: an operand of ``==``, ``!=``, ``in``, ``not in`` (alone or in a literal tuple,
    list or set)."""
    compared = set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                items = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                compared.update(id(x) for x in items)
    return [(node.lineno, id(node) in compared) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in names]


def test_the_checker_sees_op_name_literals():
    names = {"layer_norm"}
    assert name_literals('if n.op == "layer_norm":\n    pass\n', names) == [(1, True)]
    assert name_literals('ok = op in ("pointwise", "layer_norm")\n', names) == [(1, True)]
    assert name_literals('segs.append(("layer_norm", m))\n', names) == [(1, False)]
    assert name_literals('"""about layer_norm"""\nx = f"{op}: not a layer_norm"\n', names) == []


def test_row_reductions_are_named_only_in_the_registry_and_their_code_table():
    """No module of rnngraph/ tests an op's name against a row reduction's (layer norm): the
    passes ask for the op's kind (``ops.is_row_reduction``), the code generator for its CUDA
    pieces (codegen/row_reductions.py's ``row_code``); outside ``ROW_NAME_HOMES`` the name is not
    written at all."""
    names = row_reduction_names()
    assert "layer_norm" in names
    tests, literals = {}, {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        found = name_literals(path.read_text(encoding="utf-8"), names)
        if rel not in ("ops.py", "codegen/row_reductions.py") and any(c for _, c in found):
            tests[rel] = [line for line, c in found if c]
        if rel not in ROW_NAME_HOMES and found:
            literals[rel] = [line for line, _ in found]
    assert tests == {}, f"op-name tests of a row reduction (file: lines): {tests}; use its kind or row_code"
    assert literals == {}, f"a row reduction's name written outside its registry entry: {literals}"


def test_row_reductions_are_known_by_kind_and_reach_their_cuda_pieces():
    """ops.is_row_reduction: layer norm is one, a pointwise op and an op not in the registry (a
    hand-made kernel's) are not; codegen/row_reductions.py's row_code finds layer norm's pieces
    and refuses an op without them."""
    from rnngraph import ops
    from rnngraph.codegen.row_reductions import ROW_REDUCTIONS, row_code
    assert ops.is_row_reduction("layer_norm") and not ops.is_row_reduction("tanh")
    assert not ops.is_row_reduction("matmul")
    assert row_code("layer_norm") is ROW_REDUCTIONS[ops.REGISTRY["layer_norm"].cuda_row]
    with pytest.raises(NotImplementedError, match="'tanh' has no CUDA row-reduction code"):
        row_code("tanh")


def test_importing_the_package_leaves_numba_cuda_alone():
    """``import rnngraph`` (the CPU backend, ``rnngraph --help``) does not import numba.cuda: 1.4
    to 2.9 s of a 2-core machine's start-up went to it when rnngraph.codegen's __init__ imported
    the kernel helpers. The GPU backend imports it when a step is compiled for CUDA."""
    import subprocess
    import sys

    code = "import sys, rnngraph; print(sorted(m for m in sys.modules if m.startswith('numba.cuda'))[:3])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent).stdout
    assert out.strip() == "[]", out


def test_the_package_imports_its_names_at_first_use():
    """``import rnngraph`` leaves networkx, the passes and the network API unimported (a compile
    worker imports codegen modules only: codegen/parallel_compile.py), every name of ``__all__``
    then resolves to what its module defines, ``rg.distributed`` stays the function (not the module
    of that name, even after that module is imported on its own), and an unknown name is an
    AttributeError naming it, as is a submodule the package never bound (``hasattr(rg, "torch")`` is
    False and imports no PyTorch), while one it bound (``rg.optim``) is there."""
    import subprocess
    import sys

    code = """
import sys, json, rnngraph as rg
before = sorted(m for m in sys.modules if m in ("networkx", "rnngraph.passes", "rnngraph.network", "rnngraph.runtime"))
import rnngraph.distributed, rnngraph.runtime, rnngraph.network, rnngraph.codegen.tuning
names = {n: getattr(rg, n) for n in rg.__all__}
try:
    rg.no_such_name
    missing = None
except AttributeError as e:
    missing = str(e)
print(json.dumps({"before": before, "distributed": callable(rg.distributed) and rg.distributed.__module__,
                  "compile": names["compile"] is rnngraph.runtime.compile,
                  "Sequential": names["Sequential"] is rnngraph.network.Sequential,
                  "LoopTuning": names["LoopTuning"] is rnngraph.codegen.tuning.LoopTuning,
                  "cells": names["cells"].__name__, "dir": sorted(set(rg.__all__) - set(dir(rg))), "missing": missing,
                  "torch": [hasattr(rg, "torch"), "torch" in sys.modules], "optim": rg.optim.__name__,
                  "private": [n for n in dir(rg) if n.startswith("_") or n in ("annotations", "importlib")]}))
"""
    import json
    out = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                                    cwd=Path(__file__).resolve().parent.parent).stdout)
    assert out == {"before": [], "distributed": "rnngraph.distributed", "compile": True, "Sequential": True,
                   "LoopTuning": True, "cells": "rnngraph.cells", "dir": [],
                   "missing": out["missing"], "torch": [False, False], "optim": "rnngraph.optim", "private": []}, out
    assert out["missing"].startswith("module 'rnngraph' has no attribute 'no_such_name'. A cell has rg.linear, "
                                     "rg.param, rg.tanh,"), out["missing"]


#: the one module of rnngraph/ that holds inline PTX (a port off numba-cuda touches this file only)
PTX_HOME = "codegen/ptx.py"


def inline_ptx_lines(source: str) -> list[int]:
    """The lines of ``source`` that build inline assembly: ``InlineAsm`` (llvmlite) or a call
    ``asm(`` / ``_asm(`` (not ``inspect_asm(``)."""
    import re
    return [i for i, line in enumerate(source.splitlines(), 1)
            if "InlineAsm" in line or re.search(r"\b_?asm\(", line)]


def test_the_checker_sees_inline_ptx():
    assert inline_ptx_lines("x = 1\nbuilder.call(ir.InlineAsm(fn, t, c), args)\n") == [2]
    assert inline_ptx_lines('_asm(builder, "trap;", "~{memory}")\n') == [1]
    assert inline_ptx_lines('asm("mov.u32 %0, %laneid;")\n') == [1]
    assert inline_ptx_lines("d.inspect_asm()\nptx = compile_ptx(f)\n") == []


def test_inline_ptx_lives_only_in_codegen_ptx():
    """No module of rnngraph/ but codegen/ptx.py writes inline PTX (grid_barrier.py and
    flag_exchange.py import their instructions from it)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        lines = inline_ptx_lines(path.read_text(encoding="utf-8"))
        if rel != PTX_HOME and lines:
            found[rel] = lines
    assert found == {}, f"inline PTX outside {PTX_HOME} (file: lines): {found}; move it there"
    assert inline_ptx_lines((PACKAGE / PTX_HOME).read_text(encoding="utf-8"))
