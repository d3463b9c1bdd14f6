"""Who a job runs as: the starter's user-id decision.

This follows HTCondor's ``JICShadow::initUserPriv`` (src/condor_starter.V6.1/jic_shadow.cpp) on Unix,
with the helpers it calls:

* ``JobInfoCommunicator::initUserPrivNoOwner``: a starter that is not root cannot switch users, so
  the job runs as the starter's own user and the job ad is not consulted;
* ``JobInfoCommunicator::allowRunAsOwner(true, true)``: STARTER_ALLOW_RUNAS_OWNER (default True on
  Unix) AND the job's ``RunAsOwner`` (default True on Unix);
* ``JICShadow::sameUidDomain``: running as the owner also needs the job's ``UidDomain`` to be ours
  (case-insensitive), and the submitter to be believed about it: a peer on a local interface under
  TRUST_LOCAL_UID_DOMAIN, or TRUST_UID_DOMAIN, or the submit host's name inside the domain
  (``host_in_domain``);
* ``init_user_ids_from_ad`` (set_user_priv_from_ad.cpp): the account is the job's ``OsUser``, else
  the name part of its ``User`` (``name_of_user``: before the last ``@``);
* ``init_user_ids`` / ``set_user_ids_implementation`` (uids.cpp): the account must be in the passwd
  file (SOFT_UID_DOMAIN, which asks the shadow for a uid, is not supported), and uid 0 or gid 0 is
  rejected ("Attempt to initialize user_priv with root privileges rejected");
* ``new_group`` (uids.cpp): the job's ``PrimaryUnixGroup`` must be one of the account's groups, not gid 0;
* otherwise the slot's account: ``SLOT<N>_USER``, else NOBODY_SLOT_USER, else ``nobody``; a
  configured ``root`` is ignored in favour of ``nobody``;
* ``JobInfoCommunicator::checkDedicatedExecuteAccounts``: DEDICATED_EXECUTE_ACCOUNT_REGEXP, anchored
  at both ends, marks the account as dedicated to this job (its processes are the job's).

Two additions of this daemon, whose job ads come from clients rather than from a schedd that wrote
``Owner`` and ``User`` itself: :attr:`OwnerPolicy.trust_owner` False (the identity that brought the
job may not speak for its owner) is treated as a different UID domain (the job runs as the slot's
account, never as the account it names); and a job whose ``OsUser`` or ``User`` names another
account than its ``Owner`` is refused, since the Owner is what the daemon vouched for.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
from dataclasses import dataclass
from typing import Any

from .jobdesc import JobAdError, JobDescription, describe
from .os_proc import OwnerPolicy


@dataclass(frozen=True)
class Account:
    """The account a job runs as. ``switch`` False: the daemon's own user (it cannot switch).
    ``as_owner``: the job's own account rather than the slot's. ``dedicated``: only this job uses
    the account (DEDICATED_EXECUTE_ACCOUNT_REGEXP), so every process of its uid is the job's."""

    name: str
    uid: int
    gid: int
    groups: tuple[int, ...]
    switch: bool
    as_owner: bool = False
    dedicated: bool = False


@dataclass(frozen=True)
class Refusal:
    """The job cannot run: ``reason`` in words fit for its owner."""

    reason: str


def slot_user_knob(slot_name: str) -> str:
    """The name of the SLOT<N>_USER knob for a slot, as ``JICShadow::initUserPriv`` builds it: the
    slot's name upper-cased (``slot1_2`` -> ``SLOT1_2_USER``), ``SLOT1_USER`` for a name of four
    characters or fewer (no real slot name)."""
    name = slot_name if len(slot_name) > 4 else "slot1"
    return name.upper() + "_USER"


def job_account_name(job: JobDescription | Any) -> tuple[str, str] | None:
    """The account the job asks to run as and the attribute that names it: ``OsUser``, else the
    name part of ``User`` (init_user_ids_from_ad), else ``Owner`` (ads built by hand carry no User).
    This is the name whose owner must be the one who brought the job (:attr:`OwnerPolicy.trust_owner`).
    ``job`` is a :class:`~startd.starter.jobdesc.JobDescription` or a job ad (read with it)."""
    desc = describe(job, require_cmd=False)
    if desc.os_user:
        return desc.os_user, "OsUser"
    name = desc.user_name()
    if name:
        return name, "User"
    if desc.owner:
        return desc.owner, "Owner"
    return None


def host_in_domain(host: str, domain: str) -> bool:
    """internet.cpp ``host_in_domain``: ``host`` ends with ``domain`` (case-insensitive) at a label
    boundary, or ``domain`` starts with a dot."""
    skip = len(host) - len(domain)
    if skip < 0 or host[skip:].lower() != domain.lower():
        return False
    return skip == 0 or host[skip - 1] == "." or domain.startswith(".")


def same_uid_domain(job: JobDescription | Any, policy: OwnerPolicy) -> bool:
    """``JICShadow::sameUidDomain``. With no UID_DOMAIN given (``policy.uid_domain`` None) the
    comparison is not made: the daemon vouches for the owner through ``trust_owner`` alone."""
    if policy.uid_domain is None:
        return True
    job_domain = describe(job, require_cmd=False).uid_domain
    if not job_domain or job_domain.lower() != policy.uid_domain.lower():
        return False
    if policy.trust_local_uid_domain and policy.peer_is_local:
        return True
    if policy.trust_uid_domain:
        return True
    return bool(policy.submit_host) and host_in_domain(policy.submit_host or "", policy.uid_domain)


def _is_dedicated(name: str, policy: OwnerPolicy) -> bool | Refusal:
    """``checkDedicatedExecuteAccounts``: the regexp must match the whole name."""
    pattern = policy.dedicated_account_regexp
    if not pattern:
        return False
    try:
        return re.fullmatch(pattern, name) is not None
    except re.error as e:
        # HTCondor EXCEPTs on a bad pattern: no job runs until it is fixed.
        return Refusal(f"DEDICATED_EXECUTE_ACCOUNT_REGEXP {pattern!r} is not a valid regular expression: {e}")


def _account(name: str, what: str, policy: OwnerPolicy, *, as_owner: bool) -> Account | Refusal:
    """``init_user_ids``: the passwd entry of ``name``; uid 0 or gid 0 is rejected."""
    try:
        pw = pwd.getpwnam(name)
    except (KeyError, ValueError):  # ValueError: a NUL in a configured name
        return Refusal(f"{what} {name!r} is not a user on this machine")
    if pw.pw_uid == 0 or pw.pw_gid == 0:
        return Refusal(f"{what} {name!r} is root, and a job never runs as root")
    dedicated = _is_dedicated(pw.pw_name, policy)
    if isinstance(dedicated, Refusal):
        return dedicated
    groups = tuple(os.getgrouplist(pw.pw_name, pw.pw_gid))
    return Account(pw.pw_name, pw.pw_uid, pw.pw_gid, groups, True, as_owner, dedicated)


def _primary_group(account: Account, group: str) -> Account | Refusal:
    """``new_group``: the job's PrimaryUnixGroup replaces the primary group when the account is a
    member of it (and it is not gid 0)."""
    try:
        gid = grp.getgrnam(group).gr_gid
    except (KeyError, ValueError):
        gid = None
    if gid is None or gid == 0 or gid not in account.groups:
        return Refusal(f"could not install primary unix group {group!r} from the supplementary groups of {account.name!r}")
    return Account(account.name, account.uid, gid, account.groups, True, account.as_owner, account.dedicated)


def _self_account() -> Account:
    euid = os.geteuid()
    try:
        name = pwd.getpwuid(euid).pw_name
    except KeyError:
        name = str(euid)
    return Account(name, euid, os.getegid(), tuple(os.getgroups()), False)


def choose_account(job: JobDescription | Any, policy: OwnerPolicy, *, euid: int | None = None) -> Account | Refusal:
    """The account the job runs as under ``policy`` (``JICShadow::initUserPriv``), or why it cannot
    run. ``job`` is a :class:`~startd.starter.jobdesc.JobDescription`, or a job ad that is read into
    one (an ad that cannot be read is a :class:`Refusal` naming the attribute). ``euid`` is the
    daemon's effective uid (default: this process's). No side effects."""
    if (os.geteuid() if euid is None else euid) != 0:
        return _self_account()  # initUserPrivNoOwner: the ad is not consulted
    try:
        desc = describe(job, require_cmd=False)
    except JobAdError as e:
        return Refusal(e.sentence())
    run_as_owner = policy.run_as_owner and desc.run_as_owner
    named = job_account_name(desc)
    if run_as_owner and named is None:
        return Refusal("the job ad has no Owner (nor OsUser or User), and a job never runs as root")
    if run_as_owner and not (policy.trust_owner and same_uid_domain(desc, policy)):
        run_as_owner = False
    if run_as_owner and named is not None:
        name, attr = named
        owner = desc.owner
        if owner and attr != "Owner" and owner != name:
            # What the daemon vouched for (trust_owner) is the Owner: an OsUser or User naming
            # another account would run the job as someone nobody vouched for.
            return Refusal(f"the job's {attr} names {name!r}, not its Owner {owner!r}")
        chosen = _account(name, f"the job's {attr}", policy, as_owner=True)
        if isinstance(chosen, Refusal):
            return chosen
        group = desc.primary_unix_group
        return _primary_group(chosen, group) if group else chosen
    slot_user = policy.slot_user or policy.nobody_slot_user
    if not slot_user or slot_user == "root":
        slot_user = "nobody"  # "set to root, which is not allowed. Ignoring."
    return _account(slot_user, "the slot's account", policy, as_owner=False)
