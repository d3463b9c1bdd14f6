"""The scenario shell, ``startd simulate``: the engine driven on a virtual clock.

- :mod:`.scenario` the scenario format (CONTRACTS section 3) and :mod:`.usage` the jobs' usage profiles;
- :mod:`.simulator` the simulator itself: the clock, the steps, the engine's inputs and outputs;
- :mod:`.host` the simulated machine, :mod:`.starter` the simulated starters and their jobs;
- :mod:`.expect` the expectations, :mod:`.timeline` the printed timeline, :mod:`.compare` two runs side by side;
- :mod:`.report` the HTML report with its Gantt chart.
"""
