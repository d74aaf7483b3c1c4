"""``python -m rnngraph.cli ...``: the ``rnngraph`` command line."""
import sys

from . import main

sys.exit(main())
