"""startd: an HTCondor execution-point daemon (a condor_startd emulator)."""

__version__ = "0.1.0"

#: The HTCondor release whose condor_startd this daemon follows.
HTCONDOR_VERSION = "25.14.0"
#: The version string every daemon ad carries (DaemonCore::publish), in HTCondor's strict form: the version,
#: the build date, then anything else; this one names the project.
CONDOR_VERSION = f"$CondorVersion: {HTCONDOR_VERSION} 2026-11-23 PackageID: startd-{__version__} $"
