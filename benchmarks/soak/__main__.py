"""``python -m benchmarks.soak``: see ``benchmarks/soak/harness.py`` (``--help``)."""

import sys

from benchmarks.soak.harness import main

sys.exit(main())
