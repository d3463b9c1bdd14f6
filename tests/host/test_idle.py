"""KeyboardIdle and ConsoleIdle as HTCondor's sysapi measures them on Linux (idle_time.cpp), on a
made-up /dev, utmp and /proc/interrupts."""

import os
import struct

import pytest

from startd.host import IDLE_FOREVER, IdleDetector, assign_idle
from startd.host.idle import parse_interrupts, read_utmp_lines

NOW = 1_700_000_000

UTMP = struct.Struct("<hxxi32s4s32s256shhiii4i20s")


def utmp_record(ut_type: int, line: str, user: str = "alice") -> bytes:
    return UTMP.pack(ut_type, 1234, line.encode(), b"ts/0", user.encode(), b"", 0, 0, 0, 0, 0, 0, 0, 0, 0, b"")


INTERRUPTS = """\
           CPU0       CPU1
  0:         35          0   IO-APIC   2-edge      timer
  1:        {k0}          {k1}   IO-APIC   1-edge      i8042
  8:          0          0   IO-APIC   8-edge      rtc0
 12:        {m0}          0   IO-APIC  12-edge      i8042
NMI:          0          0   Non-maskable interrupts
"""


def touch(path, atime):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.utime(path, (atime, atime))


@pytest.fixture
def machine(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    utmp = tmp_path / "utmp"
    intr = tmp_path / "interrupts"

    def detector(**kw):
        kw.setdefault("console_devices", ())
        return IdleDetector(dev_dir=str(dev), utmp_paths=[str(utmp)], interrupts_path=str(intr), **kw)

    return dev, utmp, intr, detector


def test_utmp_record_layout_is_384_bytes():
    assert UTMP.size == 384
    data = utmp_record(7, "pts/3") + utmp_record(8, "pts/4") + utmp_record(7, "tty2")
    assert read_utmp_lines(data) == ["pts/3", "tty2"]  # only USER_PROCESS entries


def test_keyboard_idle_is_least_idle_terminal_of_logged_in_users(machine):
    dev, utmp, intr, detector = machine
    touch(dev / "pts" / "3", NOW - 100)
    touch(dev / "tty2", NOW - 40)
    touch(dev / "pts" / "9", NOW - 1)  # nobody logged in there: ignored
    utmp.write_bytes(utmp_record(7, "pts/3") + utmp_record(7, "tty2") + utmp_record(8, "pts/9"))
    kb, console = detector().idle_times(NOW)
    assert kb == 40
    assert console == IDLE_FOREVER  # no console device, no keyboard interrupts


def test_with_nothing_to_look_at_keyboard_idle_is_seconds_since_the_epoch(machine):
    _, _, _, detector = machine
    # no utmp, no console device, no interrupts: the terminals say "forever", the keyboard
    # daemon's last event is 0 (never), so KeyboardIdle = now - 0; ConsoleIdle stays "forever"
    assert detector().idle_times(NOW) == (NOW, IDLE_FOREVER)


def test_missing_console_device_counts_as_never_touched(machine):
    _, _, _, detector = machine
    # stat() fails -> atime 0 -> idle since the epoch, HTCondor's figure for absent devices
    assert detector(console_devices=["mouse", "console"]).idle_times(NOW) == (NOW, NOW)


def test_console_devices_set_console_idle_and_bound_keyboard_idle(machine):
    dev, utmp, _, detector = machine
    touch(dev / "console", NOW - 30)
    touch(dev / "mouse", NOW - 300)
    touch(dev / "pts" / "1", NOW - 500)
    utmp.write_bytes(utmp_record(7, "pts/1"))
    kb, console = detector(console_devices=["mouse", "/dev/console"]).idle_times(NOW)
    assert console == 30
    assert kb == 30  # console activity is keyboard activity too


def test_atime_in_the_future_counts_as_zero(machine):
    dev, _, _, detector = machine
    touch(dev / "console", NOW + 50)
    assert detector(console_devices=["console"]).idle_times(NOW) == (0, 0)


def test_interrupts_first_reading_is_activity_then_idle_grows_until_counts_change(machine):
    _, _, intr, detector = machine
    intr.write_text(INTERRUPTS.format(k0=9, k1=0, m0=5))
    d = detector()
    assert d.idle_times(NOW) == (0, 0)
    assert d.idle_times(NOW + 60) == (60, 60)
    intr.write_text(INTERRUPTS.format(k0=9, k1=1, m0=5))  # a key press on CPU1
    assert d.idle_times(NOW + 90) == (0, 0)
    assert d.idle_times(NOW + 100) == (10, 10)
    intr.write_text(INTERRUPTS.format(k0=9, k1=1, m0=6))  # the mouse moved
    assert d.idle_times(NOW + 130) == (0, 0)


def test_parse_interrupts_keyboard_and_mouse_lines():
    assert parse_interrupts(INTERRUPTS.format(k0=7, k1=3, m0=11)) == (10, 11)
    text = "  CPU0\n  1:  4  IO-APIC keyboard\n 12: 8  IO-APIC  PS/2 Mouse\n"
    assert parse_interrupts(text) == (4, 8)
    assert parse_interrupts("  CPU0\n  0:  35  IO-APIC timer\n") is None


def test_logout_keeps_counting_from_last_terminal_activity(machine):
    dev, utmp, _, detector = machine
    touch(dev / "pts" / "0", NOW - 20)
    utmp.write_bytes(utmp_record(7, "pts/0"))
    d = detector()
    assert d.idle_times(NOW)[0] == 20
    utmp.write_bytes(b"")  # everybody logged out
    assert d.idle_times(NOW + 100)[0] == 120


def test_bad_utmp_scans_every_tty_and_pty(machine):
    dev, _, _, detector = machine
    touch(dev / "tty5", NOW - 70)
    touch(dev / "ptyp0", NOW - 50)
    touch(dev / "pts" / "7", NOW - 35)
    touch(dev / "sda", NOW - 1)  # not a terminal
    assert detector(bad_utmp=True).idle_times(NOW)[0] == 35


def test_keyboard_daemon_event_counts_as_activity(machine):
    _, _, _, detector = machine
    d = detector()
    d.note_activity(NOW - 12)
    assert d.idle_times(NOW) == (12, 12)


def test_devices_sharing_dev_null_major_are_ignored(tmp_path):
    # /dev/null's own major number (1, "mem") is shared by /dev/zero: never a sign of a person.
    d = IdleDetector(console_devices=["zero"], utmp_paths=[str(tmp_path / "none")],
                     interrupts_path=str(tmp_path / "none"))
    assert d.idle_times(NOW) == (NOW, NOW)


def test_slots_not_connected_report_uptime_plus_boost():
    # defaults: SLOTS_CONNECTED_TO_CONSOLE = SLOTS_CONNECTED_TO_KEYBOARD = 0
    out = assign_idle(5, 7, now=NOW, daemon_start=NOW - 100, partitionable=[False, False])
    assert out == [(1300, 1300), (1300, 1300)]


def test_connected_slots_see_the_real_idle_times():
    out = assign_idle(5, 7, now=NOW, daemon_start=NOW - 100, partitionable=[False, False, False],
                      console_slots=2, keyboard_slots=1)
    assert out == [(5, 7), (7, 7), (1300, 1300)]
    # a partitionable slot takes the current values without using up a connected place
    out = assign_idle(5, 7, now=NOW, daemon_start=NOW - 100, partitionable=[True, False],
                      console_slots=1, keyboard_slots=1)
    assert out == [(5, 7), (5, 7)]
