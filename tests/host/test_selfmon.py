"""DaemonCore's self monitoring (self_monitor.cpp) measured on a fake process, and its way into the samples."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import psutil

from startd.host import Sampler
from startd.host.selfmon import DEFAULT_INTERVAL, MONITOR_ATTRS, SelfMonitor

T0 = 1_700_000_000.0
MB = 1024 * 1024


class FakeProcess:
    """What psutil.Process gives of itself, set by hand."""

    def __init__(self, *, user: float = 3.0, system: float = 1.0, vms: int = 200 * MB + 700, rss: int = 50 * MB + 300,
                 created: float = T0 - 100.0, sockets: int = 3) -> None:
        self.user, self.system, self.vms, self.rss, self.created = user, system, vms, rss, created
        self.sockets = sockets
        self.broken = False

    def cpu_times(self) -> Any:
        if self.broken:
            raise psutil.AccessDenied(1)
        return SimpleNamespace(user=self.user, system=self.system)

    def memory_info(self) -> Any:
        return SimpleNamespace(vms=self.vms, rss=self.rss)

    def create_time(self) -> float:
        return self.created

    def net_connections(self, kind: str = "inet") -> list[object]:
        assert kind == "inet"
        return [object()] * self.sockets


def test_exportdata_publishes_the_seven_attributes_with_htcondor_types_and_units() -> None:
    """SelfMonitorData::CollectData + ExportData (not verbose): Time is when measured, CPU usage in percent,
    ImageSize and ResidentSetSize in KB (ProcAPI::getProcInfo), Age in whole seconds, sockets and sessions
    as counts."""
    mon = SelfMonitor(FakeProcess(), start_time=T0 - 100)
    mon.collect(T0 + 0.6)
    assert mon.export() == {
        "MonitorSelfTime": int(T0),
        "MonitorSelfCPUUsage": 4.0,  # first reading: (user + system) / age * 100 = 4 / 100 * 100
        "MonitorSelfImageSize": 200 * 1024,  # vms bytes / 1024, truncated
        "MonitorSelfResidentSetSize": 50 * 1024,
        "MonitorSelfAge": 100,
        "MonitorSelfRegisteredSocketCount": 3,
        "MonitorSelfSecuritySessions": 0,
    }
    assert tuple(mon.export()) == MONITOR_ATTRS
    exported = mon.export()
    assert type(exported["MonitorSelfCPUUsage"]) is float
    assert all(type(exported[k]) is int for k in MONITOR_ATTRS if k != "MonitorSelfCPUUsage")
    # the verbose-only figures are the collector's, not the startd's
    assert "MonitorSelfUserCpuTime" not in exported and "MonitorSelfSysCpuTime" not in exported


def test_before_the_first_measurement_the_figures_are_selfmonitordatas_initial_ones() -> None:
    """SelfMonitorData::SelfMonitorData: last_sample_time -1, cpu_usage -1.0, sizes 0, age -1, counts 0."""
    assert SelfMonitor(FakeProcess()).export() == {
        "MonitorSelfTime": -1, "MonitorSelfCPUUsage": -1.0, "MonitorSelfImageSize": 0,
        "MonitorSelfResidentSetSize": 0, "MonitorSelfAge": -1, "MonitorSelfRegisteredSocketCount": 0,
        "MonitorSelfSecuritySessions": 0}


def test_cpu_usage_after_the_first_reading_is_cpu_time_used_over_wall_time_between_readings() -> None:
    """ProcAPI::do_usage_sampling: (ustime - oldtime) / timediff * 100."""
    proc = FakeProcess()
    mon = SelfMonitor(proc)
    mon.collect(T0)
    proc.user += 6.0  # 6 CPU seconds in 240 wall seconds
    mon.collect(T0 + 240)
    assert mon.export()["MonitorSelfCPUUsage"] == 2.5
    assert mon.export()["MonitorSelfAge"] == 340


def test_a_reading_less_than_a_second_later_or_with_cpu_time_going_back_repeats_the_old_figure() -> None:
    """ProcAPI::do_usage_sampling: timediff < 1 keeps the old usage (and the old reading in force); a CPU
    time lower than the last one ("lying OS") keeps the old usage too."""
    proc = FakeProcess()
    mon = SelfMonitor(proc)
    mon.collect(T0)
    proc.user += 10.0
    mon.collect(T0 + 0.5)
    assert mon.cpu_usage == 4.0
    mon.collect(T0 + 10)  # measured from the reading at T0, not the one half a second later
    assert mon.cpu_usage == 100.0
    proc.user -= 5.0
    mon.collect(T0 + 20)
    assert mon.cpu_usage == 100.0


def test_a_process_that_cannot_be_read_keeps_its_last_figures_while_time_and_counts_move_on() -> None:
    """SelfMonitorData::CollectData assigns ProcAPI's figures only when getProcInfo succeeds; the sample time
    and the socket and session counts are taken every time."""
    proc = FakeProcess()
    sessions = iter([2, 5])
    mon = SelfMonitor(proc, sessions=lambda: next(sessions))
    mon.collect(T0)
    before = mon.export()
    proc.broken, proc.sockets = True, 7
    mon.collect(T0 + 240)
    after = mon.export()
    assert after["MonitorSelfTime"] == int(T0) + 240
    assert (after["MonitorSelfRegisteredSocketCount"], after["MonitorSelfSecuritySessions"]) == (7, 5)
    for k in ("MonitorSelfCPUUsage", "MonitorSelfImageSize", "MonitorSelfResidentSetSize", "MonitorSelfAge"):
        assert after[k] == before[k]


def test_registered_socket_count_is_what_the_daemon_passes_in_when_it_does() -> None:
    """DaemonCore::RegisteredSocketCount: the daemon may count its own sockets."""
    mon = SelfMonitor(FakeProcess(sockets=9), sockets=lambda: 4)
    mon.collect(T0)
    assert mon.registered_socket_count == 4


def test_self_monitor_timer_fires_at_start_then_every_statistics_window_quantum() -> None:
    """SelfMonitorData::EnableMonitoring: Register_Timer(0, quantum): at once, then every quantum seconds
    (STATISTICS_WINDOW_QUANTUM, 240 by default)."""
    assert DEFAULT_INTERVAL == 240
    mon = SelfMonitor(FakeProcess())
    assert mon.poll(T0) is not None
    assert mon.poll(T0 + 5) is None and mon.poll(T0 + 239.9) is None
    assert mon.poll(T0 + 240)["MonitorSelfTime"] == int(T0) + 240  # type: ignore[index]
    assert mon.poll(T0 + 300) is None
    assert mon.poll(T0 + 100) is not None  # the clock went back before the last measurement


def test_the_real_process_is_measured_in_kb_and_percent() -> None:
    """ProcAPI on this very process: sizes in KB of the real figures, age from its start."""
    mon = SelfMonitor()
    mon.collect()
    info = psutil.Process().memory_info()
    assert abs(mon.rs_size - info.rss // 1024) < 64 * 1024
    assert mon.image_size >= mon.rs_size > 0
    assert mon.age >= 0 and mon.cpu_usage >= 0.0 and mon.registered_socket_count >= 0


# --- through the sampler --------------------------------------------------------------------------------------


def _sampler(mon: SelfMonitor) -> Sampler:
    return Sampler(".", self_monitor=mon)


def test_the_first_sample_carries_the_facts_daemon_start_time_and_the_first_measurement() -> None:
    """DaemonCore::getStartTime (DaemonStartTime) travels once with the facts; the self_monitor timer fires
    at start-up, so the first slot ads carry its figures."""
    s = _sampler(SelfMonitor(FakeProcess(), start_time=T0 - 7.5))
    first = s.sample(T0)
    assert first.extra["DaemonStartTime"] == int(T0 - 7.5) and type(first.extra["DaemonStartTime"]) is int
    assert "Arch" in first.extra
    assert {k: first.extra[k] for k in MONITOR_ATTRS}["MonitorSelfTime"] == int(T0)


def test_slot_ads_do_not_change_between_two_self_monitor_timer_firings() -> None:
    """self_monitor runs every STATISTICS_WINDOW_QUANTUM seconds, not at every sample: samples in between
    carry nothing in ``extra`` (so no slot ad is republished for it), the sample at the next firing carries the
    new figures."""
    proc = FakeProcess()
    s = _sampler(SelfMonitor(proc, interval=240))
    s.sample(T0)
    for dt in (5, 60, 120, 239):
        proc.user += 1.0
        assert s.sample(T0 + dt).extra == {}
    later = s.sample(T0 + 240).extra
    assert set(later) == set(MONITOR_ATTRS) and later["MonitorSelfTime"] == int(T0) + 240


def test_announced_daemon_attributes_travel_once_and_again_only_when_they_change() -> None:
    """MyAddress and StartdIpAddr (DaemonCore::publish, MachAttributes::publish_static) reach every slot ad
    with the next sample; an unchanged announcement republishes nothing."""
    s = _sampler(SelfMonitor(FakeProcess()))
    s.sample(T0)
    s.announce(MyAddress="<a>", StartdIpAddr="<a>")
    assert s.sample(T0 + 1).extra == {"MyAddress": "<a>", "StartdIpAddr": "<a>"}
    s.announce(MyAddress="<a>", StartdIpAddr="<a>")
    assert s.sample(T0 + 2).extra == {}
    s.announce(MyAddress="<b>", StartdIpAddr="<b>")
    assert s.sample(T0 + 3).extra == {"MyAddress": "<b>", "StartdIpAddr": "<b>"}
    attrs = s.daemon_attrs()
    assert attrs["MyAddress"] == "<b>" and attrs["MonitorSelfTime"] == int(T0)
    assert isinstance(attrs["DaemonStartTime"], int)
