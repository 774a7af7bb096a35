"""``python -m hfx ...``: the same command line as the ``hfx`` console script."""

import sys

from hfx.cli import main


sys.exit(main())
