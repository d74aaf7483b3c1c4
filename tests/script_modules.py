"""Load a script of the repository (an example, a benchmark) as a module, to call its functions."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load_script(relative: str, name: str | None = None):
    """The module of the file ``ROOT/relative`` (e.g. ``examples/japanese_vowels.py``), executed anew."""
    path = ROOT / relative
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
