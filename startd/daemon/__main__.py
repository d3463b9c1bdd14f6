"""``python -m startd.daemon --healthcheck``: the container's health check (the same as ``startd health``)."""

import sys

from .health import healthcheck

sys.exit(healthcheck())
