"""The user job event log (``log = job.log``) in HTCondor's text format, as ``WriteUserLog`` writes it
(src/condor_utils/write_user_log.cpp) with the event bodies of src/condor_utils/condor_event.cpp.

Each event is a header ``NNN (CCCCC.PPP.000) YYYY-MM-DD HH:MM:SS <text>``, its body lines, and ``...``.
The file is opened for appending, one ``write`` an event, so several jobs (and several submits) can share
one log, as they do in HTCondor. The log is the submitter's: it is written with the submitter's rights.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

SUBMIT, EXECUTE, EVICTED, TERMINATED, IMAGE_SIZE, ABORTED, SUSPENDED, UNSUSPENDED, HELD = 0, 1, 4, 5, 6, 9, 10, 11, 12


def _usage(seconds: float) -> str:
    """``Usr 0 00:00:00``: days, then hours:minutes:seconds (condor_event.cpp ``rusageToStr``)."""
    s = int(seconds)
    return f"{s // 86400} {s % 86400 // 3600:02d}:{s % 3600 // 60:02d}:{s % 60:02d}"


def _usage_line(user: float, sys: float, what: str) -> str:
    return f"\t\tUsr {_usage(user)}, Sys {_usage(sys)}  -  {what}\n"


@dataclass
class EventLog:
    """One job event log file (``path`` absolute)."""

    path: str

    def write(self, number: int, cluster: int, proc: int, body: str, when: float | None = None) -> None:
        """Append one event: its header, ``body`` (lines ending in newlines; the first one continues the
        header's line) and the ``...`` separator. Raises OSError when the log cannot be written."""
        t = time.localtime(time.time() if when is None else when)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", t)
        text = f"{number:03d} ({cluster:03d}.{proc:03d}.000) {stamp} {body}...\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            os.write(fd, text.encode("utf-8", "replace"))
        finally:
            os.close(fd)

    # -- the events -----------------------------------------------------------------------------------

    def submit(self, cluster: int, proc: int, host: str) -> None:
        """SubmitEvent: ``Job submitted from host: <addr>``."""
        self.write(SUBMIT, cluster, proc, f"Job submitted from host: {host}\n")

    def execute(self, cluster: int, proc: int, host: str, slot: str = "") -> None:
        """ExecuteEvent: ``Job executing on host: <addr>`` (and the slot's name, as 25 writes it)."""
        extra = f"\tSlotName: {slot}\n" if slot else ""
        self.write(EXECUTE, cluster, proc, f"Job executing on host: {host}\n{extra}")

    def image_size(self, cluster: int, proc: int, image_kb: int, memory_mb: int | None, rss_kb: int | None,
                   pss_kb: int | None = None) -> None:
        """JobImageSizeEvent: the image size and, when known, memory usage, RSS and PSS."""
        body = f"Image size of job updated: {image_kb}\n"
        if memory_mb is not None:
            body += f"\t{memory_mb}  -  MemoryUsage of job (MB)\n"
        if rss_kb is not None:
            body += f"\t{rss_kb}  -  ResidentSetSize of job (KB)\n"
        if pss_kb is not None:
            body += f"\t{pss_kb}  -  ProportionalSetSizeKb of job (KB)\n"
        self.write(IMAGE_SIZE, cluster, proc, body)

    def suspended(self, cluster: int, proc: int, processes: int = 1) -> None:
        """JobSuspendedEvent."""
        self.write(SUSPENDED, cluster, proc, f"Job was suspended.\n\tNumber of processes actually suspended: "
                                             f"{processes}\n")

    def unsuspended(self, cluster: int, proc: int) -> None:
        """JobUnsuspendedEvent."""
        self.write(UNSUSPENDED, cluster, proc, "Job was unsuspended.\n")

    def evicted(self, cluster: int, proc: int, user_cpu: float = 0.0, sys_cpu: float = 0.0,
                sent: int = 0, received: int = 0) -> None:
        """JobEvictedEvent: not checkpointed, with the run's usage and bytes."""
        body = ("Job was evicted.\n\t(0) Job was not checkpointed.\n" + _usage_line(user_cpu, sys_cpu, "Run Remote Usage")
                + _usage_line(0, 0, "Run Local Usage")
                + f"\t{sent}  -  Run Bytes Sent By Job\n\t{received}  -  Run Bytes Received By Job\n")
        self.write(EVICTED, cluster, proc, body)

    def terminated(self, cluster: int, proc: int, exit_code: int | None, signal: int | None,
                   user_cpu: float = 0.0, sys_cpu: float = 0.0, sent: int = 0, received: int = 0) -> None:
        """JobTerminatedEvent: normal termination with its return value, or abnormal with its signal."""
        if signal is not None:
            how = f"\t(0) Abnormal termination (signal {signal})\n\t(0) No core file\n"
        else:
            how = f"\t(1) Normal termination (return value {exit_code or 0})\n"
        body = ("Job terminated.\n" + how
                + _usage_line(user_cpu, sys_cpu, "Run Remote Usage") + _usage_line(0, 0, "Run Local Usage")
                + _usage_line(user_cpu, sys_cpu, "Total Remote Usage") + _usage_line(0, 0, "Total Local Usage")
                + f"\t{sent}  -  Run Bytes Sent By Job\n\t{received}  -  Run Bytes Received By Job\n"
                + f"\t{sent}  -  Total Bytes Sent By Job\n\t{received}  -  Total Bytes Received By Job\n")
        self.write(TERMINATED, cluster, proc, body)

    def aborted(self, cluster: int, proc: int, reason: str) -> None:
        """JobAbortedEvent: ``Job was aborted.`` and why."""
        self.write(ABORTED, cluster, proc, f"Job was aborted.\n\t{_one_line(reason)}\n")

    def held(self, cluster: int, proc: int, reason: str, code: int = 0, subcode: int = 0) -> None:
        """JobHeldEvent: ``Job was held.``, the reason and its code."""
        self.write(HELD, cluster, proc, f"Job was held.\n\t{_one_line(reason)}\n\tCode {code} Subcode {subcode}\n")


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "(no reason given)"
