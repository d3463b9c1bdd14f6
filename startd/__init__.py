"""startd: an HTCondor execution-point daemon (a condor_startd emulator)."""

__version__ = "0.1.0"
