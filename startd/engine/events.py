"""The engine's inputs and outputs.

The engine (:class:`startd.engine.Engine`) is a pure state machine: it never sleeps, reads the clock,
touches a process or the network. A shell (the daemon, the simulator) feeds it *inputs* — a host sample,
a command, a job's exit, the passing of time — and carries out the *outputs* it returns: start or
signal a job, publish an ad, reply to a command, wake the engine again at a given time.

Every input carries ``now`` (seconds since the epoch, real or virtual). Every call
``engine.handle(input)`` returns the list of outputs it caused, in order; ``engine.next_wakeup()``
says when the engine next needs ``engine.handle(Tick(now=t))``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal as _Lit

from ..classad import ClassAd

DrainHow = _Lit["graceful", "quick", "fast"]
ShutdownHow = _Lit["graceful", "peaceful", "fast"]
OnCompletion = _Lit["nothing", "resume", "exit", "restart", "reconfig"]


# --- inputs --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Input:
    """Base of every input; ``now`` is the time it happens."""

    now: float


@dataclass(frozen=True, slots=True)
class Tick(Input):
    """Time has passed: fire every timer due at or before ``now``."""


@dataclass(frozen=True, slots=True)
class HostSample(Input):
    """What the shell measured of the machine. ``None`` keeps the previous value."""

    load_avg: float | None = None  # load of processes that are not HTCondor jobs
    keyboard_idle: float | None = None  # seconds since the last keyboard/mouse input
    console_idle: float | None = None  # seconds since the last console (tty) input
    memory: int | None = None  # MB of physical memory
    disk: int | None = None  # KB free in EXECUTE
    swap: int | None = None  # KB of virtual memory
    cpus: int | None = None  # DETECTED_CPUS
    keyboard_active: bool | None = None  # True: someone is typing, KeyboardIdle/ConsoleIdle stay 0
    extra: dict[str, Any] = field(default_factory=dict)  # further machine attributes (CpuModel, ...)


@dataclass(frozen=True, slots=True)
class AbortClaim(Input):
    """A claim request the shell refused before the engine saw it (an Owner it may not vouch for, a job ad
    that fails validation): as ``abort_claim`` (command.cpp) the slot, when Unclaimed, Matched or Drained,
    goes through the Owner state, where IS_OWNER decides again. No reply: the shell answered the request."""

    slot: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Command(Input):
    """A command from a schedd, negotiator or administrator. ``request`` is echoed in its Reply."""

    request: Any = None


@dataclass(frozen=True, slots=True)
class Match(Command):
    """The negotiator matched ``slot``: Unclaimed -> Matched (transition 2), MATCH_TIMEOUT starts."""

    slot: str = ""


@dataclass(frozen=True, slots=True)
class RequestClaim(Command):
    """A schedd asks to claim ``slot`` for the job ``job`` (its ad). On a partitionable slot a dynamic
    slot is carved. ``claim_id`` is the id to use (the shell makes unguessable ones); ``lease`` overrides
    the job's JobLeaseDuration."""

    slot: str = ""
    claim_id: str = ""
    job: ClassAd | None = None
    lease: float | None = None
    client: str = ""  # the schedd's name (ClientMachine)


@dataclass(frozen=True, slots=True)
class ActivateClaim(Command):
    """Start a job on a claim (Claimed/Idle -> Claimed/Busy); ``job`` None reuses the claim's job ad."""

    claim_id: str = ""
    job: ClassAd | None = None


@dataclass(frozen=True, slots=True)
class SuspendClaim(Command):
    claim_id: str = ""


@dataclass(frozen=True, slots=True)
class ContinueClaim(Command):
    claim_id: str = ""


@dataclass(frozen=True, slots=True)
class DeactivateClaim(Command):
    """Stop the job but keep the claim (back to Claimed/Idle once the job has exited)."""

    claim_id: str = ""
    graceful: bool = True


@dataclass(frozen=True, slots=True)
class ReleaseClaim(Command):
    """The schedd is done with the claim."""

    claim_id: str = ""


@dataclass(frozen=True, slots=True)
class Keepalive(Command):
    """Renews the claim's lease."""

    claim_id: str = ""


@dataclass(frozen=True, slots=True)
class Vacate(Command):
    """condor_vacate: evict the job(s) of ``slot`` (every slot when empty); ``fast`` skips the soft kill."""

    slot: str = ""
    fast: bool = False


@dataclass(frozen=True, slots=True)
class Drain(Command):
    """condor_drain. ``on_completion`` is what happens once every slot is Drained/Idle: nothing, resume
    (draining ends), exit (the startd shuts down), restart (it starts afresh) or reconfig (draining ends
    and the configuration is read again); ``resume_on_completion`` is the older spelling of resume."""

    how: DrainHow = "graceful"
    resume_on_completion: bool = False
    reason: str = ""
    check: str | None = None  # an expression every slot must satisfy before draining starts
    start: str | None = None  # START expression while draining (default false)
    on_completion: OnCompletion | None = None


@dataclass(frozen=True, slots=True)
class CancelDrain(Command):
    """condor_drain -cancel; ``drain_id`` (-request-id) must name the current (or last) drain when given."""

    drain_id: str = ""


@dataclass(frozen=True, slots=True)
class Reconfig(Command):
    """A new configuration (already read and validated by the shell)."""

    config: Any = None


@dataclass(frozen=True, slots=True)
class Shutdown(Command):
    how: ShutdownHow = "graceful"


@dataclass(frozen=True, slots=True)
class JobStarted(Input):
    """The starter really started the job of ``claim_id`` (pid None for a simulated job)."""

    claim_id: str
    pid: int | None = None


@dataclass(frozen=True, slots=True)
class JobExited(Input):
    """The job of ``claim_id`` ended. ``signal`` is set when a signal ended it.

    This is the starter's final update (Claim::receiveJobClassAdUpdate): a claimed slot goes to
    Claimed/Cleaning until the starter is reaped. ``starter_exited`` says the starter is gone too (the
    slot leaves Cleaning at once); when False, :class:`StarterExited` follows once the starter has
    cleaned up. ``final_update`` False is a starter that went away without one (a job that never
    started): the slot skips Cleaning."""

    claim_id: str
    exit_code: int | None = 0
    signal: int | None = None
    usage: dict[str, Any] = field(default_factory=dict)  # RemoteUserCpu, RemoteSysCpu, ImageSize, ...
    starter_exited: bool = True
    final_update: bool = True


@dataclass(frozen=True, slots=True)
class StarterExited(Input):
    """The starter of ``claim_id``'s job was reaped, after a :class:`JobExited` with ``starter_exited``
    False (Resource::starterExited)."""

    claim_id: str


@dataclass(frozen=True, slots=True)
class JobUsage(Input):
    """The starter's periodic update of a running job: its CPU load (for CondorLoadAvg; None keeps it)
    and job attributes it measured (RemoteUserCpu, ResidentSetSize, ...), which go into the claim's job
    ad as Claim::receiveJobClassAdUpdate puts them, where the policy reads them."""

    claim_id: str
    load: float | None = 0.0
    usage: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BenchmarksDone(Input):
    """The benchmark jobs finished: attributes (Mips, KFlops, ...) to merge into every slot ad."""

    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BackfillExited(Input):
    """The machine's backfill client exited (on its own, or after a BackfillCommand kill)."""


@dataclass(frozen=True, slots=True)
class CronOutput(Input):
    """A startd cron job produced ads to merge into slot ads (see :mod:`startd.cron`).

    ``name`` is the job's name (STARTD_CRON_JOBLIST); ``ads`` are (tag, ad) pairs in the order the job
    printed them: tag None is the job's own ad, a tag names a further ad (``JOB.tag``) that later runs
    replace by name. Attribute names already carry the job's PREFIX. ``update`` True/False forces or
    suppresses an immediate update (None: STARTD_CRON_AUTOPUBLISH decides). ``slot`` restricts the
    ads to one slot (the simulator's ``cron`` step with ``slot``); None lets the ads' own
    SlotMergeConstraint / SlotName / SlotTypeId / SlotId and the job's SLOTS decide.
    """

    name: str
    ads: list[tuple[str | None, ClassAd]] = field(default_factory=list)
    update: bool | None = None
    slot: str | None = None


@dataclass(frozen=True, slots=True)
class CronLoad(Input):
    """The JOB_LOAD of the startd cron jobs and of the benchmark jobs running now: HTCondor load,
    counted in CondorLoadAvg (the cron load on the first slot, the benchmark load on the slot that
    is Benchmarking)."""

    load: float = 0.0
    benchmarks: float = 0.0


@dataclass(frozen=True, slots=True)
class HookResult(Input):
    """A hook the engine asked for (:class:`RunHook`) has ended. ``request`` is the RunHook's.

    ``ad`` is its standard output read as one ad (None: it printed nothing usable); ``error`` says
    why it did not run to a normal end (missing, not executable, timed out, printed too much);
    ``bad_lines`` are output lines that were not attributes."""

    request: int = 0
    hook: str = ""
    slot: str = ""
    ad: ClassAd | None = None
    exit_code: int | None = None
    signal: int | None = None
    error: str = ""
    bad_lines: tuple[str, ...] = ()


# --- outputs -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Output:
    """Base of every output; ``t`` is the time it happened."""

    t: float


@dataclass(frozen=True, slots=True)
class SlotCreated(Output):
    slot: str
    state: str
    activity: str
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class SlotDeleted(Output):
    slot: str


@dataclass(frozen=True, slots=True)
class Transition(Output):
    """A slot changed state and/or activity. ``number`` is the manual's transition number (or None);
    ``explain`` what decided it (:mod:`startd.engine.explain`)."""

    slot: str
    from_state: str
    from_activity: str
    to_state: str
    to_activity: str
    number: int | None
    reason: str
    explain: Any = None  # a startd.engine.explain.Explanation (which imports this module)


@dataclass(frozen=True, slots=True)
class Reply(Output):
    """The answer to a command. ``error`` says why it was refused; ``explain`` what decided it (the expression
    that refused it, with its clauses, or the command)."""

    request: Any
    command: str
    accepted: bool
    error: str = ""
    claim_id: str = ""
    slot: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    explain: Any = None  # a startd.engine.explain.Explanation (which imports this module)


JobAction = _Lit["start", "suspend", "continue", "soft_kill", "hard_kill"]


@dataclass(frozen=True, slots=True)
class JobCommand(Output):
    """Ask the starter to act on the job of ``claim_id`` running in ``slot``."""

    slot: str
    claim_id: str
    what: JobAction
    job: ClassAd | None = None  # the job ad, for "start"
    signal: str | None = None  # for soft_kill: the job's KillSig (default SIGTERM)


@dataclass(frozen=True, slots=True)
class JobEvent(Output):
    """A job-level event worth reporting (``exit`` once the job is gone)."""

    slot: str
    what: str  # start | suspend | continue | soft_kill | hard_kill | exit
    claim_id: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AdChanged(Output):
    """The ad of ``slot`` changed; the shell publishes ``engine.slot_ad(slot)``."""

    slot: str


@dataclass(frozen=True, slots=True)
class RunBenchmarks(Output):
    """Run the benchmark jobs now (Unclaimed/Benchmarking) and report BenchmarksDone."""


@dataclass(frozen=True, slots=True)
class BackfillCommand(Output):
    """Start or stop the backfill client on ``slot``."""

    slot: str
    what: _Lit["start", "soft_kill", "hard_kill"]


@dataclass(frozen=True, slots=True)
class RunHook(Output):
    """Run the hook ``hook`` (FETCH_WORK, REPLY_FETCH, EVICT_CLAIM, PREPARE_JOB_BEFORE_TRANSFER,
    PREPARE_JOB, UPDATE_JOB_INFO, JOB_EXIT) of ``keyword`` for ``slot``: the program ``path`` with
    ``args``, ``stdin`` on its standard input, killed after ``timeout`` seconds. When ``request`` is
    non-zero the engine waits for a :class:`HookResult` carrying it; zero means nobody waits (the
    advisory hooks), though the shell still logs how it went."""

    slot: str
    keyword: str
    hook: str
    path: str
    args: tuple[str, ...] = ()
    stdin: str = ""
    request: int = 0
    claim_id: str = ""
    timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class ReconfigRequested(Output):
    """Draining completed under -reconfig-on-completion and has ended: the shell reads its configuration
    again (ResMgr::cancelDraining with reconfig, which calls main_config)."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class ShutdownComplete(Output):
    """Every slot is idle after a shutdown: the shell may exit (and start again when ``restart``, as
    condor_drain -restart-on-completion asks)."""

    restart: bool = False
    reason: str = ""
