"""Helpers that drive the engine directly with inputs at chosen times."""

from __future__ import annotations

from typing import Any

import pytest

from startd import config
from startd.classad import ClassAd
from startd.engine import Engine
from startd.engine.events import HostSample, Output, Tick, Transition
from startd.sim.scenario import with_submit_defaults


class Driver:
    """An engine plus the outputs it produced so far."""

    def __init__(self, text: str = "", cpus: int = 1, kbd: float = 100_000, load: float = 0.0,
                 benchmarks: bool = False, keyboard: bool = True, disk: int | None = 10_000_000,
                 extra: dict[str, Any] | None = None) -> None:
        # The state-machine tests are about static slots: one per CPU (NUM_SLOTS alone gives partitionable
        # slots, SLOT_TYPE_0_PARTITIONABLE defaulting to true). A test's own layout knobs, written after, win.
        pre = f"NUM_SLOTS = {cpus}\nSLOT_TYPE_0_PARTITIONABLE = False\n"
        pre += "" if benchmarks else "RUNBENCHMARKS = False\n"
        if keyboard:  # every slot watches the keyboard and console, as POLICY : Desktop sets it
            pre += "SLOTS_CONNECTED_TO_KEYBOARD = 1000\nSLOTS_CONNECTED_TO_CONSOLE = 1000\n"
        self.eng = Engine(config.load(text=pre + text),
                          HostSample(now=0.0, cpus=cpus, memory=4096 * cpus, disk=disk, keyboard_idle=kbd,
                                     load_avg=load, extra=dict(extra or {})), machine="m")
        self.out: list[Output] = list(self.eng.start())

    def do(self, inp: Any) -> list[Output]:
        """Fire every timer due before ``inp`` (as a shell would), then handle it."""
        self.until(inp.now - 1e-6)
        got = self.eng.handle(inp)
        self.out += got
        return got

    def until(self, t: float) -> list[Output]:
        """Tick at every wakeup up to and including ``t``."""
        got: list[Output] = []
        while True:
            w = self.eng.next_wakeup()
            if w is None or w > t:
                break
            got += self.eng.handle(Tick(now=w))
        self.out += got
        return got

    def state(self, slot: str = "slot1") -> str:
        return "/".join(self.eng.state_of(slot))

    def numbers(self, since: int = 0) -> list[int | None]:
        return [o.number for o in self.out[since:] if isinstance(o, Transition)]

    def transitions(self) -> list[Transition]:
        return [o for o in self.out if isinstance(o, Transition)]


def simulate_bench() -> Any:
    """benchmarks/simulate_bench.py, whose generated days (claims, jobs, keepalives, load changes) the
    quiet-poll tests replay."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "simulate_bench.py"
    spec = importlib.util.spec_from_file_location("simulate_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def job(**kw: Any) -> ClassAd:
    """A job ad as condor_submit writes it (with its default resource requests)."""
    base: dict[str, Any] = {"Owner": "alice", "JobUniverse": 5, "ClusterId": 1, "ProcId": 0}
    base.update(kw)
    return with_submit_defaults(ClassAd(base))


@pytest.fixture
def drv() -> type[Driver]:
    return Driver
