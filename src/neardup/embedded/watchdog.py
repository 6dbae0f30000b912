"""The embedded server's watchdog: ``python -m neardup.embedded.watchdog DATA_DIR PID TIMEOUT``.

Started detached by whoever starts the embedded server; stops it once unused for TIMEOUT seconds
and exits, or exits as soon as that server (postmaster PID) is gone.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from neardup.embedded.default_server import watch
from neardup.errors import NeardupError


def main(argv: Sequence[str] | None = None) -> int:
    """Watch the server given on the command line; the exit status is 1 if stopping it failed."""
    data_dir, pid, timeout = sys.argv[1:] if argv is None else argv
    logging.basicConfig(format="%(asctime)s neardup watchdog %(process)d: %(message)s", level=logging.INFO)
    try:
        watch(Path(data_dir), int(pid), float(timeout))
    except NeardupError as exc:
        logging.getLogger("neardup.server").error("%s", exc)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
