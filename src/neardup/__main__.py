"""``python -m neardup``: the command line."""

import sys

from neardup.cli import main

sys.exit(main())
