"""The Requirements condor_submit writes: the user's expression with the clauses ``SubmitHash::SetRequirements``
appends for a vanilla job (src/condor_utils/submit_utils.cpp): Arch and OpSys unless referred to, the disk,
memory and CPU requests, custom resource requests, and the file transfer (or file system domain) clause.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..classad import ClassAd, ClassAdSyntaxError, parse_expr
from ..classad.ast import AttrRef, iter_nodes
from .language import SubmitError

_SCOPES = ("my", "target")
#: What GetExprReferences finds in the scratch ad: the rest of an unscoped name is the machine's.
_JOB_SCRATCH = ("requestmemory", "vm_ckptmac", "requirements")


def split_references(text: str) -> tuple[set[str], set[str]]:
    """(job references, machine references) of an expression, lower-case, as ``GetExprReferences`` sorts them:
    ``MY.x`` is the job's, ``TARGET.x`` and an unscoped name the job ad does not hold are the machine's."""
    job: set[str] = set()
    machine: set[str] = set()
    for n in iter_nodes(parse_expr(text).node):
        if type(n) is not AttrRef:
            continue
        if n.base is None:
            if n.lname in _SCOPES:
                continue
            (job if n.lname in _JOB_SCRATCH else machine).add(n.lname)
        elif type(n.base) is AttrRef and n.base.base is None and n.base.lname in _SCOPES:
            (job if n.base.lname == "my" else machine).add(n.lname)
    return job, machine


def _literal_number(ad: ClassAd, attr: str) -> float | None:
    """The number an attribute is written as, or None when it is an expression (``ExprTreeIsLiteralNumber``)."""
    node = ad.get_node(attr)
    if node is None:
        return None
    value = ad.evaluate(attr) if type(node).__name__ == "Literal" else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def requirements_expr(job: ClassAd, user_req: str | None, config: Mapping[str, str | None], arch: str, opsys: str,
                      where: tuple[str, int]) -> str:
    """The Requirements text of ``job`` (built so far) given the user's ``requirements`` value."""
    answer = f"({user_req})" if user_req else ""
    append = config.get("APPEND_REQ_VANILLA") or config.get("APPEND_REQUIREMENTS")
    if append:
        answer += f" && ({append})" if answer else f"({append})"
    job_refs: set[str] = set()
    machine_refs: set[str] = set()
    if answer:
        try:
            job_refs, machine_refs = split_references(answer)
        except ClassAdSyntaxError as e:
            raise SubmitError(f"Requirements = {answer}: {e}", *where) from None
    if "requirements" in job_refs or "requirements" in machine_refs:
        raise SubmitError(f"Requirements = {answer}\nIs Circular. Did you intend to use $(Requirements) ?", *where)
    checks_opsys = bool(machine_refs & {"opsys", "opsysandver", "opsyslongname", "opsysshortname", "opsysname",
                                        "opsyslegacy"})
    if "arch" not in machine_refs:
        answer += (" && " if answer else "") + f'(TARGET.Arch == "{arch}")'
    if not checks_opsys:
        answer += f' && (TARGET.OpSys == "{opsys}")'
    if "disk" not in machine_refs:
        if "RequestDisk" in job:
            disk = _literal_number(job, "RequestDisk")
            if disk is None or disk > 0:
                answer += ' && (versionGE(split(TARGET.CondorVersion)[1], "25.12.0") || (TARGET.Disk >= RequestDisk))'
        else:
            answer += " && (TARGET.Disk >= DiskUsage)"
    elif "RequestDisk" in job:
        answer += " && (TARGET.Disk >= RequestDisk)"
    if "RequestMemory" in job:
        mem = _literal_number(job, "RequestMemory")
        if mem is None or mem > 1.0:
            answer += " && (TARGET.Memory >= RequestMemory)"
    if "cpus" not in machine_refs and "RequestCpus" in job:
        cpus = _literal_number(job, "RequestCpus")
        if cpus is None or cpus > 1.0:
            answer += " && (TARGET.Cpus >= RequestCpus)"
    tags = sorted({job.name_of(a) for a in job if a.lower().startswith("request") and len(a) >= 9 and a[7] != "_"}
                  - {"RequestCpus", "RequestDisk", "RequestMemory"}, key=str.lower)
    for attr in tags:
        tag = attr[len("Request"):]
        if tag.lower() in machine_refs:
            continue
        value = job.evaluate(attr)
        if isinstance(value, bool):
            continue
        if isinstance(value, (int, float)) or value is None or type(value).__name__ == "Undefined":
            if not isinstance(value, (int, float)) or value > 0:
                if f"Require{tag}" in job:
                    answer += f" && (countMatches(MY.Require{tag},TARGET.Available{tag}) >= {attr})"
                else:
                    answer += f" && (TARGET.{tag} >= {attr})"
        elif isinstance(value, str) and value:
            answer += f" && regexp({attr}, TARGET.{tag})"
    should = job.evaluate("ShouldTransferFiles") if "ShouldTransferFiles" in job else "IF_NEEDED"
    domain = "(TARGET.FileSystemDomain == MY.FileSystemDomain)"
    checks_fsdomain = "filesystemdomain" in machine_refs
    checks_xfer = bool(machine_refs & {"hasfiletransfer", "hasjobtransferplugins"})
    if should == "NO":
        if not checks_fsdomain:
            answer += f" && {domain}"
    elif not checks_xfer:
        join, close = " && (", ")"
        if should == "IF_NEEDED" and not checks_fsdomain:
            answer += join + domain
            join, close = " || (", "))"
        answer += join + "TARGET.HasFileTransfer"
        if job.evaluate("WhenToTransferOutput") == "ON_SUCCESS" if "WhenToTransferOutput" in job else False:
            answer += ' && versioncmp( split(TARGET.CondorVersion)[1], "8.9.7" ) >= 0'
        answer += close
    return answer
