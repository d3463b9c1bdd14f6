"""Whom a job from the network may run as: the Owner a command names is trusted only so far as its sender
may speak for that Owner.

HTCondor's schedd authenticates the submitter and writes the job's ``Owner`` and ``User`` itself; the
startd then trusts the job ad because it comes from a daemon allowed DAEMON (REQUEST_CLAIM and
ACTIVATE_CLAIM are registered at DAEMON, startd_main.cpp). A client of this startd may be its own
schedd (``startd submit``), so the rule is carried over as: an identity allowed DAEMON may run a job as
any Owner; any other authenticated identity only as itself (a job without an Owner gets the sender's
name, as condor_submit fills it in); and a job whose Owner cannot be vouched for (an unauthenticated
sender, where the configuration lets one claim at all, or a sender from another UID_DOMAIN, as
JICShadow::initUserPriv falls back when the job's UidDomain is not ours) never runs as its Owner: the
starter runs it as the slot's user or ``nobody``.
"""

from __future__ import annotations

from ..classad import ClassAd
from .wire import Identity


class OwnerRefused(ValueError):
    """The sender may not run a job as the Owner it names; the message says so in one line."""


def _owner(job: ClassAd) -> str | None:
    if "Owner" not in job:
        return None
    value = job.evaluate("Owner")
    return value if isinstance(value, str) and value else None


def owner_decision(job: ClassAd | None, identity: Identity, *, may_act_for_others: bool,
                   uid_domain: str) -> tuple[ClassAd | None, bool]:
    """``(job, trust_owner)``: the job ad to use (an Owner filled in when it had none) and whether the job
    may run as its Owner. Raises :class:`OwnerRefused` when an authenticated sender that may not act for
    others names another Owner than itself."""
    if may_act_for_others:
        return job, True
    if not identity.authenticated:
        return job, False
    if job is None:
        return job, identity.domain.lower() == uid_domain.lower()
    owner = _owner(job)
    if owner is None:
        job = job.copy()
        job["Owner"] = identity.name
        owner = identity.name
    if owner != identity.name:
        raise OwnerRefused(f"the job's Owner {owner!r} is not {identity.user}: only an identity allowed DAEMON "
                           "may run jobs for another user")
    return job, identity.domain.lower() == uid_domain.lower()
