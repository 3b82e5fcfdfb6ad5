"""``python -m specdec ...`` is the ``specdec`` command (specdec/cli/main.py)."""

import sys

from specdec.cli.main import main

sys.exit(main())
