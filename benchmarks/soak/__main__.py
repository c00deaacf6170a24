"""``python -m benchmarks.soak``: see ``benchmarks/soak/harness.py`` (``--help``)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.soak.harness import main  # noqa: E402

sys.exit(main())
