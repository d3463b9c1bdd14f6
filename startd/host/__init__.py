"""Where the machine's facts come from: the psutil-free sampler of load, idle time, memory and disk,
the static identity of the machine, and the arithmetic of CondorLoadAvg."""

from .facts import (
    clock_day,
    clock_min,
    detected_cpus,
    detected_memory_mb,
    free_disk_kb,
    machine_facts,
    virtual_memory_kb,
)
from .idle import IDLE_FOREVER, IdleDetector, assign_idle
from .load import CondorLoadTracker, LoadQueue, condor_load_avg, owner_load, split_owner_load
from .sampler import Sampler, idle_times

__all__ = [
    "Sampler",
    "machine_facts",
    "idle_times",
    "free_disk_kb",
    "virtual_memory_kb",
    "detected_cpus",
    "detected_memory_mb",
    "clock_min",
    "clock_day",
    "IdleDetector",
    "IDLE_FOREVER",
    "assign_idle",
    "LoadQueue",
    "CondorLoadTracker",
    "condor_load_avg",
    "owner_load",
    "split_owner_load",
]
