"""Reports of a scenario's run, drawn from the JSON events of ``startd simulate --json``: an ASCII Gantt
chart (``gantt``, for ``--timeline``) and one self-contained HTML page (``html_report``, for ``--report``)."""

from .gantt import gantt
from .html import html_report
from .model import Clock, JobSpan, StateSpan, Timeline, read_events

__all__ = ["gantt", "html_report", "read_events", "Clock", "Timeline", "StateSpan", "JobSpan"]
