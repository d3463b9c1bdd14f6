"""Host traces: what ``startd record`` and ``startd run --record`` write, and a scenario's ``host_trace:``
replays (docs/scenarios.md, "host_trace").

One JSON object a line, per sample: ``t`` (seconds since the epoch, when the sample was taken) and the
keys of a scenario's ``host:`` block in its units: ``cpus``, ``memory`` (MB), ``disk`` (KB free in
EXECUTE), ``swap`` (KB), ``load_avg`` (the load of processes that are not HTCondor jobs:
TotalLoadAvg - TotalCondorLoadAvg, as a scenario's ``load_avg`` is), ``keyboard_idle`` and
``console_idle`` (seconds). Each line is written whole and flushed, so a trace cut short by Ctrl-C or a
crash is still whole lines.
"""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

from ..engine.events import HostSample


def trace_line(sample: HostSample) -> dict[str, Any]:
    """The trace line of one sample (rounded: milliseconds, a thousandth of load, whole seconds idle);
    a value the sample lacks is left out."""
    line: dict[str, Any] = {"t": round(float(sample.now), 3)}
    for key in ("cpus", "memory", "disk", "swap"):
        value = getattr(sample, key)
        if value is not None:
            line[key] = int(value)
    if sample.load_avg is not None:
        line["load_avg"] = round(max(0.0, float(sample.load_avg)), 3)
    for key in ("keyboard_idle", "console_idle"):
        value = getattr(sample, key)
        if value is not None:
            line[key] = int(max(0.0, float(value)))
    return line


class TraceWriter:
    """Appends one line per sample to a trace file (opened at once, so a bad path fails early)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._file: TextIO | None = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - kept open

    def write(self, sample: HostSample) -> None:
        if self._file is None:
            return
        self._file.write(json.dumps(trace_line(sample), separators=(", ", ": ")) + "\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
