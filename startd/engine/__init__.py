"""The pure condor_startd engine: slots, claims, states, activities, timers and policy.

>>> from startd import config
>>> from startd.engine import Engine
>>> from startd.engine.events import HostSample
>>> eng = Engine(config.load(text="NUM_CPUS = 1\\nRUNBENCHMARKS = False\\n"), HostSample(now=0.0, cpus=1, memory=1024), machine="m")
>>> [type(o).__name__ for o in eng.start()][:2]
['SlotCreated', 'Transition']
>>> eng.state_of("slot1")
('Unclaimed', 'Idle')
"""

from .engine import Engine, Slot
from .states import ACTIVITIES, TRANSITIONS, Activity, State, TransitionRule, transition_number

__all__ = ["Engine", "Slot", "State", "Activity", "TRANSITIONS", "TransitionRule", "ACTIVITIES",
           "transition_number"]
