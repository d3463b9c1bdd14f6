"""How ``startd run`` answers the commands that reach it over MQTT (:class:`CommandHandling`, a part of
:class:`startd.daemon.loop.DaemonLoop`).

The transport has authenticated and authorized the sender (:mod:`startd.transport.dispatch`) before a
command gets here; what remains depends on the command and on who sent it:

- ``request_claim`` and ``activate_claim``: whether the sender may run the job as the Owner it names
  (:func:`startd.security.jobowner.owner_decision`); the answer travels with the claim to the starter.
- ``reconfig`` with configuration text: HTCondor's runtime configuration rules
  (:mod:`startd.security.runtime_config`); every accepted change is logged with who sent it.
- ``vacate``, ``drain``, ``cancel_drain``, ``off``: logged with who sent them.
"""

from __future__ import annotations

import time
from typing import Any

import structlog

from .. import CONDOR_VERSION
from .. import config as _config
from ..classad import ClassAd
from ..classad.jsonform import ad_to_obj
from ..config.describe import PatternError, answer
from ..engine import events as ev
from ..engine.claim import public_claim_id
from ..security.jobowner import OwnerRefused, owner_decision
from ..security.runtime_config import RuntimeConfigError, parse_runtime_config, render
from ..security.wire import Identity
from ..starter import JobAdError, JobDescription
from ..transport import messages as msg
from ..transport.dispatch import current_identity

log = structlog.get_logger("startd.daemon")

_ADMIN_COMMANDS = (msg.VacateCommand, msg.DrainCommand, msg.CancelDrainCommand, msg.OffCommand)


class CommandHandling:
    """The command handler of the daemon loop, and what it remembers of each claim's sender."""

    engine: Any
    conf: Any
    metrics: Any
    claim_ids: Any
    transport: Any
    shutting_down: str | None
    restart_requested: bool
    #: claim id -> whether its job may run as its Owner (see owner_decision); claims the daemon made
    #: itself (fetch-work hooks) are not here and are trusted, their job comes from the administrator
    owner_trust: dict[str, bool]
    #: claim id -> why its job could not be started (told to the activate_claim that asked for it)
    start_failures: dict[str, str]

    async def feed(self, inp: ev.Input) -> list[ev.Output]:
        raise NotImplementedError

    async def _answer_query(self, cmd: msg.QueryCommand) -> msg.ReplyMessage:
        raise NotImplementedError

    async def _adopt_config(self, new: Any, by: str) -> None:
        raise NotImplementedError

    def _shutdown_begun(self, how: str) -> None:
        """A shutdown begins: :class:`startd.daemon.shell.Daemon` bounds it."""
        return None

    # -- who sent it ---------------------------------------------------------------------------------

    def _levels(self, identity: Identity) -> set[str]:
        """The names of the authorization levels ``identity`` holds."""
        security = self.transport.dispatcher.security if self.transport is not None else None
        if security is None:
            return set()
        return {lvl.name for lvl in security.table.levels(identity, client_is_local=security.client_is_local)}

    def _with_owner_checked(self, cmd: msg.BaseCommand,
                            identity: Identity) -> tuple[msg.BaseCommand, bool, ClassAd | None]:
        """The command with its job's Owner vouched for (filled in when missing), whether the job may run as
        that Owner, and the job ad so checked (None without one). Raises OwnerRefused."""
        job = msg._job_ad(getattr(cmd, "job", None))
        checked, trusted = owner_decision(job, identity, may_act_for_others="DAEMON" in self._levels(identity),
                                          uid_domain=self.conf.get("UID_DOMAIN") or "")
        if checked is not job and checked is not None:
            cmd = cmd.model_copy(update={"job": ad_to_obj(checked)})
        return cmd, trusted, checked

    @staticmethod
    def _job_refused(job: ClassAd | None, *, activation: bool) -> str | None:
        """Why a command's job ad cannot run, or None. Read here, before anything changes: a job the
        starter would refuse (NUL bytes, sizes, types, paths leaving the sandbox, bad user names) is
        refused with the claim untouched, instead of being claimed or activated and then failing. A
        request_claim's ad need not name its Cmd yet (it may be a matching ad); an activation's must."""
        if job is None:
            return None
        try:
            JobDescription.from_ad(job, require_cmd=activation)
        except JobAdError as e:
            return str(e)
        return None

    def _config_val(self, cmd: msg.ConfigValCommand) -> msg.ReplyMessage:
        """condor_config_val -startd: what the live configuration says of the names asked, secrets withheld
        (:func:`startd.config.describe.answer`; READ level)."""
        try:
            data = answer(self.conf, cmd.names, cmd.dump, cmd.summary)
        except PatternError as e:
            return msg.error_reply(cmd.request_id, str(e), command="config_val")
        except TimeoutError:
            return msg.error_reply(cmd.request_id, f"-dump pattern {cmd.dump!r} took too long to match",
                                   command="config_val")
        return msg.make_reply(cmd.request_id, True, command="config_val", version=CONDOR_VERSION, **data)

    def _remember_trust(self, claim_id: str, trusted: bool) -> None:
        if len(self.owner_trust) > 64 and self.engine is not None:
            live = {c.id for s in self.engine.slots.values() for c in (s.claim, s.pre, s.pending) if c is not None}
            for old in [k for k in self.owner_trust if k not in live]:
                del self.owner_trust[old]
        self.owner_trust[claim_id] = trusted

    # -- the handler ---------------------------------------------------------------------------------

    async def _on_command(self, cmd: msg.BaseCommand) -> msg.ReplyMessage:
        if self.engine is None:
            return msg.error_reply(cmd.request_id, "the startd is starting", command=cmd.command)
        self.metrics.inc("commands")
        identity = current_identity.get()
        if isinstance(cmd, msg.QueryCommand):
            return await self._answer_query(cmd)  # startd.daemon.ads: in slices, from cached JSON
        if isinstance(cmd, msg.ConfigValCommand):
            return self._config_val(cmd)
        trusted: bool | None = None
        if isinstance(cmd, (msg.RequestClaimCommand, msg.ActivateClaimCommand)):
            try:
                cmd, trusted, job = self._with_owner_checked(cmd, identity)
            except OwnerRefused as e:
                log.warning("command refused", command=cmd.command, identity=identity.user, reason=str(e))
                await self._abort_claim(cmd, str(e))
                return msg.error_reply(cmd.request_id, str(e), command=cmd.command)
            if isinstance(cmd, msg.ActivateClaimCommand) and cmd.job is None:
                trusted = None  # the claim's own job, vouched for when the claim was made
            refused = self._job_refused(job, activation=isinstance(cmd, msg.ActivateClaimCommand))
            if refused is not None:
                log.warning("command refused", command=cmd.command, identity=identity.user, reason=refused)
                await self._abort_claim(cmd, refused)
                return msg.error_reply(cmd.request_id, refused, command=cmd.command)
        if isinstance(cmd, msg.ReconfigCommand) and cmd.config is not None and cmd.config.strip():
            try:
                assignments = parse_runtime_config(cmd.config, self.conf, self._levels(identity))
            except RuntimeConfigError as e:
                log.warning("reconfig refused", identity=identity.user, reason=str(e))
                return msg.error_reply(cmd.request_id, str(e), command=cmd.command)
            cmd = cmd.model_copy(update={"config": render(assignments)})
            log.info("runtime configuration received", by=identity.user, names=[n for n, _ in assignments])
        if isinstance(cmd, _ADMIN_COMMANDS) or isinstance(cmd, msg.ReconfigCommand):
            log.info("administrative command", command=cmd.command, by=identity.user)
        try:
            inp = msg.to_engine_input(cmd, time.time(), claim_id_factory=self.claim_ids,
                                      load_config=self._load_for_reconfig)
        except msg.CommandError as e:
            log.warning("command refused", command=cmd.command, identity=identity.user, reason=str(e))
            await self._abort_claim(cmd, str(e))
            return msg.error_reply(cmd.request_id, str(e), command=cmd.command)
        if inp is None:
            return msg.error_reply(cmd.request_id, f"'{cmd.command}' is not handled here", command=cmd.command)
        if isinstance(inp, ev.Shutdown):
            if self.shutting_down != "fast" and self.shutting_down != inp.how:
                self._shutdown_begun(inp.how)
            self.shutting_down = inp.how if inp.how == "fast" else (self.shutting_down or inp.how)
            # condor_restart is a shutdown followed by a fresh start; a later plain off means off
            self.restart_requested = isinstance(cmd, msg.OffCommand) and cmd.restart
            log.info("shutdown requested", how=inp.how, restart=self.restart_requested, by=identity.user)
        outputs = await self.feed(inp)
        reply = next((o for o in outputs if isinstance(o, ev.Reply) and o.request is cmd), None)
        if reply is None:
            return msg.error_reply(cmd.request_id, "the engine gave no reply", command=cmd.command)
        if reply.accepted and isinstance(cmd, msg.ActivateClaimCommand):
            failed = self.start_failures.pop(cmd.claim_id, None)
            if failed is not None:
                # The starter could not start the job: the slot is back in Claimed/Idle with its claim, as
                # after a starter that exits at once in HTCondor; the client hears why and may try again.
                prefix = "the job could not be started"
                text = failed if failed.startswith(prefix) else f"{prefix}: {failed}"
                return msg.error_reply(cmd.request_id, text, command=cmd.command, slot=reply.slot)
        if trusted is not None and reply.accepted:
            claim_id = reply.claim_id or getattr(cmd, "claim_id", "")
            if claim_id:
                self._remember_trust(claim_id, trusted)
        if isinstance(inp, ev.Reconfig):
            if reply.accepted:
                await self._adopt_config(inp.config, f"command from {identity.user}")
            else:
                log.error("reconfig refused, keeping the previous configuration", error=reply.error)
        elif reply.accepted and reply.claim_id and isinstance(cmd, msg.RequestClaimCommand):
            log.info("claim granted", slot=reply.slot, claim=public_claim_id(reply.claim_id), to=identity.user)
        try:
            return msg.reply_from_engine(reply, cmd)
        except Exception as e:  # noqa: BLE001 - undone below, and answered
            return await self._undo(cmd, reply, f"the reply could not be made: {type(e).__name__}: {e}")

    async def _abort_claim(self, cmd: msg.BaseCommand, why: str) -> None:
        """A request_claim refused here, before the engine saw it, ends as abort_claim (command.cpp) ends
        one: the slot (Unclaimed, Matched or Drained) goes through Owner, where IS_OWNER decides again,
        instead of staying Matched until MATCH_TIMEOUT."""
        if isinstance(cmd, msg.RequestClaimCommand) and self.engine is not None and cmd.slot:
            await self.feed(ev.AbortClaim(now=time.time(), slot=cmd.slot, reason=f"claim request refused: {why}"))

    async def _undo(self, cmd: msg.BaseCommand, reply: ev.Reply, why: str) -> msg.ReplyMessage:
        """A command the engine carried out but whose reply cannot reach the client: undo it, so that no
        claim waits for a client that never heard of it and no job runs for nobody. A new claim is
        released (its slot goes back as after RELEASE_CLAIM), a new activation is deactivated."""
        log.error("command undone", command=cmd.command, slot=reply.slot, reason=why)
        self.metrics.inc("commands_undone")
        undo: ev.Input | None = None
        if isinstance(cmd, msg.RequestClaimCommand) and reply.claim_id:
            undo = ev.ReleaseClaim(now=time.time(), request=None, claim_id=reply.claim_id)
            self.owner_trust.pop(reply.claim_id, None)
        elif isinstance(cmd, msg.ActivateClaimCommand):
            undo = ev.DeactivateClaim(now=time.time(), request=None, claim_id=cmd.claim_id,
                                      graceful=False)
        if undo is not None:
            await self.feed(undo)
        return msg.error_reply(cmd.request_id, f"{cmd.command} undone: {why}", command=cmd.command)

    def _load_for_reconfig(self, text: str | None) -> Any:
        """The configuration read again; ``text`` (runtime configuration, already checked) is added to the
        runtime configuration already in force and read after the files and the ``_CONDOR_*``
        environment, as real_config's process_dynamic_configs reads runtime settings last. It stays for
        later reconfigurations until the daemon restarts, as HTCondor keeps runtime settings."""
        if not text:
            return _config.reload(self.conf)
        before = getattr(self.conf, "runtime", "") or ""
        return _config.reload(self.conf, runtime=before + "\n" + text + "\n")

