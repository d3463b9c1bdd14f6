"""Helpers for the slot tests: a configuration from text and a host sample."""

from __future__ import annotations

from startd import config, slots
from startd.config import Config
from startd.engine.events import HostSample


def host(cpus: int = 8, memory: int = 16384, disk: int = 100_000_000, swap: int = 2_000_000) -> HostSample:
    return HostSample(now=0, cpus=cpus, memory=memory, disk=disk, swap=swap)


def conf(text: str = "") -> Config:
    # The typed settings view is not built here: the slot builder reads the knobs itself.
    return config.load(text=text, validate=False)


def layout(text: str = "", **h: int) -> slots.MachineLayout:
    return slots.build_layout(conf(text), host(**h))
