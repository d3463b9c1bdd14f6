"""KeyboardIdle and ConsoleIdle, measured the way HTCondor's startd measures them on Linux.

The machine-wide figures (``IdleDetector.idle_times``):

* **user idle** (KeyboardIdle): the smallest ``now - atime`` over the terminals of logged-in users
  (``USER_PROCESS`` records of utmp; with STARTD_HAS_BAD_UTMP every ``/dev/tty*``, ``/dev/pty*`` and
  ``/dev/pts/*``), the CONSOLE_DEVICES, the last event a keyboard daemon reported, and the console idle.
* **console idle** (ConsoleIdle): the smallest ``now - atime`` over CONSOLE_DEVICES (default
  ``mouse, console``, relative to /dev) and the keyboard/mouse interrupt counters of
  ``/proc/interrupts`` (the ``i8042``/``keyboard`` and second ``i8042``/``mouse`` lines): a change in
  the counts since the previous reading is activity now. Interrupt counting starts at the first call,
  which therefore counts as activity; without such lines the interrupts say "idle forever"
  (2**31 - 1).

Corner cases follow HTCondor: a device that cannot be stat()ed counts as never touched (idle =
``now``, i.e. seconds since the epoch); devices sharing /dev/null's major number are ignored the same
way; an atime in the future counts as 0; with no logged-in user the last known terminal idle time
keeps growing, and with none ever seen the terminals say 2**31 - 1; the keyboard daemon's last
event defaults to 0 (the epoch), so a machine with nothing to look at reports KeyboardIdle = ``now``.

What a *slot* reports is decided afterwards by :func:`assign_idle`: only the first
SLOTS_CONNECTED_TO_CONSOLE / SLOTS_CONNECTED_TO_KEYBOARD slots (default 0) see these figures; the
others report the daemon's uptime plus DISCONNECTED_KEYBOARD_IDLE_BOOST (default 1200 s).
"""

from __future__ import annotations

import os
import stat
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: HTCondor's "infinitely idle": INT_MAX.
IDLE_FOREVER = 2**31 - 1

# struct utmp on Linux (glibc, 64-bit and 32-bit alike since the time fields are int32):
# ut_type(h) pad ut_pid(i) ut_line[32] ut_id[4] ut_user[32] ut_host[256] ut_exit(2h) ut_session(i)
# ut_tv(2i) ut_addr_v6(4i) unused[20]
_UTMP = struct.Struct("<hxxi32s4s32s256shhiii4i20s")
_USER_PROCESS = 7


@dataclass
class _KmState:
    keys: int
    mouse: int
    timepoint: int


def _numbers_after_label(line: str) -> int:
    """Sum the per-CPU counts of a /proc/interrupts line: the tokens after ``NN:`` up to the first
    one that is not a number (the controller name)."""
    total = 0
    tokens = [t for t in line.split(" ") if t != ""]
    for tok in tokens[1:]:
        if tok.isdigit():
            total += int(tok)
        else:
            break
    return total


def parse_interrupts(text: str) -> tuple[int, int] | None:
    """Keyboard and mouse interrupt totals from the text of /proc/interrupts, or None when neither
    device appears (USB input, a VM or a container without a PS/2 controller)."""
    lines = text.splitlines()[1:]  # the first line is the CPU header
    keys: int | None = None
    for line in lines:
        if "i8042" in line or "keyboard" in line:
            keys = _numbers_after_label(line)
            break
    mouse: int | None = None
    seen_i8042 = False
    for line in lines:
        if "i8042" in line and not seen_i8042:
            seen_i8042 = True
        elif "i8042" in line or "Mouse" in line or "mouse" in line:
            mouse = _numbers_after_label(line)
            break
    if keys is None and mouse is None:
        return None
    return (keys or 0, mouse or 0)


def read_utmp_lines(data: bytes) -> list[str]:
    """The terminal names (``pts/0``, ``tty1``) of USER_PROCESS records in a utmp file's bytes."""
    out: list[str] = []
    for off in range(0, len(data) - _UTMP.size + 1, _UTMP.size):
        rec = _UTMP.unpack_from(data, off)
        if rec[0] != _USER_PROCESS:
            continue
        line = rec[2].split(b"\0", 1)[0].decode("utf-8", "replace")
        out.append(line)
    return out


class IdleDetector:
    """Keeps the little state HTCondor's idle measurement needs between calls."""

    def __init__(
        self,
        console_devices: Iterable[str] = ("mouse", "console"),
        bad_utmp: bool = False,
        dev_dir: str = "/dev",
        utmp_paths: Sequence[str] = ("/var/run/utmp", "/var/adm/utmp"),
        interrupts_path: str = "/proc/interrupts",
    ) -> None:
        self.console_devices = [self._strip_dev(d) for d in console_devices if d.strip()]
        self.bad_utmp = bad_utmp
        self.dev_dir = dev_dir
        self.utmp_paths = tuple(utmp_paths)
        self.interrupts_path = interrupts_path
        self.last_x_event = 0  # set by note_activity(): what condor_kbdd reports
        self._null_major: int | None = None
        self._null_major_checked = False
        self._saved_tty: tuple[int, int] | None = None  # (when, idle) of the last real utmp answer
        self._km: _KmState | None = None

    @staticmethod
    def _strip_dev(name: str) -> str:
        name = name.strip()
        return name[5:] if name.startswith("/dev/") else name

    def note_activity(self, now: float) -> None:
        """Someone used the keyboard or mouse now (what condor_kbdd tells the startd)."""
        self.last_x_event = int(now)

    # -- devices ---------------------------------------------------------------------------------

    def _null_dev_major(self) -> int | None:
        if not self._null_major_checked:
            self._null_major_checked = True
            try:
                st = os.stat(os.path.join(self.dev_dir, "null"))
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                    self._null_major = os.major(st.st_rdev)
            except OSError:
                pass
        return self._null_major

    def dev_idle_time(self, name: str, now: int) -> int:
        """Seconds since ``/dev/<name>`` was last read."""
        if not name or name.startswith("unix:"):
            return now  # X servers' fake display names
        null_major = self._null_dev_major()
        try:
            st = os.stat(os.path.join(self.dev_dir, name))
            atime = int(st.st_atime)
            if atime != 0 and null_major is not None and os.major(st.st_rdev) == null_major:
                atime = 0  # /dev/null's relatives (mem, zero, ...) are not terminals
        except OSError:
            atime = 0
        if atime > now:
            return 0
        return now - atime

    def _utmp_tty_idle(self, now: int) -> int:
        data: bytes | None = None
        for path in self.utmp_paths:
            try:
                data = Path(path).read_bytes()
                break
            except OSError:
                continue
        if data is None:
            return IDLE_FOREVER
        answer = IDLE_FOREVER
        for line in read_utmp_lines(data):
            answer = min(answer, self.dev_idle_time(line, now))
        if answer == IDLE_FOREVER and self._saved_tty is not None:
            # Everybody logged out: keep counting from the last terminal activity we knew of.
            when, idle = self._saved_tty
            return max(0, now - when + idle)
        if answer != IDLE_FOREVER:
            self._saved_tty = (now, answer)
        return answer

    def _all_tty_idle(self, now: int) -> int:
        answer = IDLE_FOREVER
        try:
            names = os.listdir(self.dev_dir)
        except OSError:
            names = []
        for name in names:
            if name.startswith(("tty", "pty")):
                answer = min(answer, self.dev_idle_time(name, now))
        pts = os.path.join(self.dev_dir, "pts")
        if os.path.isdir(pts):
            for name in os.listdir(pts):
                answer = min(answer, self.dev_idle_time("pts/" + name, now))
        return answer

    def _interrupt_idle(self, now: int) -> int:
        try:
            counts = parse_interrupts(Path(self.interrupts_path).read_text())
        except OSError:
            counts = None
        if self._km is None:
            if counts is None:
                return IDLE_FOREVER
            # The first reading has nothing to compare with: HTCondor counts it as activity.
            self._km = _KmState(counts[0], counts[1], now)
            return 0
        if counts is not None and (counts[0], counts[1]) != (self._km.keys, self._km.mouse):
            self._km = _KmState(counts[0], counts[1], now)
        return now - self._km.timepoint

    # -- the measurement -------------------------------------------------------------------------

    def idle_times(self, now: float) -> tuple[int, int]:
        """(KeyboardIdle, ConsoleIdle) in whole seconds for the machine, at ``now``."""
        t = int(now)
        user = self._all_tty_idle(t) if self.bad_utmp else self._utmp_tty_idle(t)
        console = -1
        for dev in self.console_devices:
            d = self.dev_idle_time(dev, t)
            user = min(user, d)
            console = d if console == -1 else min(console, d)
        user = min(user, t - self.last_x_event)
        if self.last_x_event:
            x = t - self.last_x_event
            console = x if console == -1 else min(console, x)
        km = self._interrupt_idle(t)
        console = km if console == -1 else min(console, km)
        user = min(user, console)
        return user, console


def assign_idle(
    keyboard_idle: int,
    console_idle: int,
    now: float,
    daemon_start: float,
    partitionable: Sequence[bool],
    console_slots: int = 0,
    keyboard_slots: int = 0,
    disconnected_boost: int = 1200,
) -> list[tuple[int, int]]:
    """(KeyboardIdle, ConsoleIdle) for each slot, the slots in the startd's owner-state order.

    The first ``console_slots`` (SLOTS_CONNECTED_TO_CONSOLE) non-partitionable slots get the real
    console idle time, the first ``keyboard_slots`` the real keyboard idle time; every later slot
    reports the daemon's uptime plus DISCONNECTED_KEYBOARD_IDLE_BOOST, as if nobody had touched it
    since the daemon started. Partitionable slots take the current value without using up a place.
    """
    disconnected = int(now - daemon_start) + disconnected_boost
    console, keyboard = console_idle, keyboard_idle
    left_console, left_keyboard = console_slots, keyboard_slots
    out: list[tuple[int, int]] = []
    for is_p in partitionable:
        if not is_p:
            left_console -= 1
            left_keyboard -= 1
            if left_console < 0:
                console = disconnected
            if left_keyboard < 0:
                keyboard = console
        out.append((keyboard, console))
    return out
