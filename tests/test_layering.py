"""The layers of ARCHITECTURE.md, checked on the source: every import statement of a module
(those inside functions too), parsed with ``ast`` and resolved to an absolute module name.

- ``rnngraph/ir.py`` and ``rnngraph/ops.py`` (what a graph is) import nothing of rnngraph but
  each other and ``rnngraph.errors``; ``rnngraph/schedule_options.py`` nothing of rnngraph;
- ``rnngraph/passes/`` imports nothing from ``rnngraph.codegen`` (the code generator takes the
  schedule and a LoopTuning; the passes take ScheduleOptions) nor from the API modules above it,
  where ``RNNGRAPH_LOOP`` is read (``rnngraph/loop_env.py``).
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rnngraph"
#: modules above the passes: the code generator, the backends and the API
ABOVE_PASSES = ("rnngraph.codegen", "rnngraph.executor", "rnngraph.reference", "rnngraph.runtime", "rnngraph.layer",
                "rnngraph.torch", "rnngraph.cli", "rnngraph.lm", "rnngraph.bench", "rnngraph.loop_env",
                "rnngraph.data", "rnngraph.schedule_export")


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


@pytest.mark.parametrize("name, allowed", [("ir.py", ("rnngraph.errors",)),
                                           ("ops.py", ("rnngraph.errors", "rnngraph.ir")),
                                           ("schedule_options.py", ())])
def test_the_bottom_layer_imports_nothing_above_it(name, allowed):
    bad = sorted(m for m in rnngraph_imports(PACKAGE / name) if not under(m, allowed))
    assert bad == [], f"{name} imports {bad}"
