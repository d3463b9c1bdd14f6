"""The pure condor_startd engine: slots, claims, states, activities, timers and policy.

It is split as HTCondor splits condor_startd.V6, each layer built on the one below:

- :mod:`.states` the state/activity transition table (data); :mod:`.events` the inputs and outputs;
- :mod:`.claim` claims (``Claim``); :mod:`.policy` the configuration the engine reads;
- :mod:`.resource` one slot and its ad (``Resource``); :mod:`.resstate` its state machine (``ResState``);
- :mod:`.claiming` claims accepted, retired, killed and handed over, and their jobs' start and end;
- :mod:`.hookmgr` fetch work and job hooks (``StartdHookMgr``), with :mod:`.cronhooks` the cron and hook
  glue it calls;
- :mod:`.resmgr` the machine (``ResMgr``); :mod:`.command` the commands and :class:`Engine`.

>>> from startd import config
>>> from startd.engine import Engine
>>> from startd.engine.events import HostSample
>>> eng = Engine(config.load(text="NUM_CPUS = 1\\nRUNBENCHMARKS = False\\n"), HostSample(now=0.0, cpus=1, memory=1024), machine="m")
>>> [type(o).__name__ for o in eng.start()][:2]
['SlotCreated', 'Transition']
>>> eng.state_of("slot1")
('Unclaimed', 'Idle')
"""

from .command import Engine
from .resource import Slot
from .states import ACTIVITIES, TRANSITIONS, Activity, State, TransitionRule, transition_number

__all__ = ["Engine", "Slot", "State", "Activity", "TRANSITIONS", "TransitionRule", "ACTIVITIES",
           "transition_number"]
