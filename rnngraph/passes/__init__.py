"""The compiler's passes, one per file; each is a plain function with a docstring stating what
it assumes and what it guarantees."""
from .validate import validate

__all__ = ["validate"]
