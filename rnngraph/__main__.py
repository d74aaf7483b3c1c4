"""``python -m rnngraph ...``: the same command line as the ``rnngraph`` script."""
import sys

from .cli import main

sys.exit(main())
