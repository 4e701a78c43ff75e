"""``python -m freight``: the command line (see :mod:`freight.cli`)."""

import sys

from freight.cli import main

if __name__ == "__main__":
    sys.exit(main())
