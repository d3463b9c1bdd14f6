"""The asyncio shell, ``startd run``: the engine driven by the real clock, the host and the wires.

- :mod:`.shell` the daemon: start-up, signals, the bounded shutdown, restart;
- :mod:`.loop` the loop that feeds the engine and carries out its outputs;
- :mod:`.commands` the handling of the commands that reach it; :mod:`.ads` publishing the ads;
- :mod:`.configuration` the daemon's knobs, directories and instance lock;
- :mod:`.health`, :mod:`.supervise`, :mod:`.watchdog`, :mod:`.metrics`, :mod:`.logfiles`: health check,
  service supervision, the exit watchdog, counters and the log files.
"""
