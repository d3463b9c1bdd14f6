"""The fault tests reuse the daemon tests' kit (a real ``startd run``, brokers, signed requests)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "daemon"))
