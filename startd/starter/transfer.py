"""The starter's side of file transfer (``JICShadow::initWithFileTransfer`` and the ``FileTransfer`` object of
src/condor_utils/file_transfer.cpp), for a submitter whose files this machine can reach: the job's Iwd is a
local (or shared) directory.

A job transfers when its ad says so as condor_submit writes it: ``ShouldTransferFiles`` YES (or IF_NEEDED
from another file system domain) *and* ``WhenToTransferOutput`` (HTCondor's starter refuses a transferring
job without it; an ad without it, hand-written, runs in its sandbox without transfer, as before). Then:

* in, before the job starts: the executable (unless ``TransferExecutable`` is false) under its own name,
  made executable; ``In`` (unless ``TransferIn`` is false); every ``TransferInput`` entry: a file by its
  name, a directory with its contents, a directory named with a trailing ``/`` by its contents only;
* out, when the job exits (and when it is evicted under ``ON_EXIT_OR_EVICT``): the ``TransferOutput``
  entries, or with none every new or changed top-level file of the sandbox; the job's standard output and
  error (written to ``_condor_stdout`` and ``_condor_stderr`` in the sandbox) to its ``Out`` and ``Err``;
  ``TransferOutputRemaps`` (``name = dest; ...``) renames any of them.

Every copy runs in a helper process that *is* the job's account (the kernel decides what it may read and
write, as it decides for the job itself), with links in the sandbox never followed. A relative path may not
leave Iwd or the sandbox. Outputs are written next to their destination under a temporary name and renamed
into place only when all of them were written, so a failure leaves nothing half-copied in Iwd.
"""

from __future__ import annotations

import asyncio
import json
import os
import posixpath
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any

from ..classad import ClassAd
from .jobdesc import JobDescription

STDOUT_NAME = "_condor_stdout"
STDERR_NAME = "_condor_stderr"
#: How long one transfer may take before it is given up (seconds).
TRANSFER_TIMEOUT = 600.0
#: The most entries one transfer copies.
MAX_ENTRIES = 100_000


class TransferError(Exception):
    """A transfer that failed; ``reason`` is one line naming the file."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class TransferPlan:
    """What a job's ad asks to be transferred (paths as checked, Iwd absolute)."""

    iwd: str
    inputs: list[tuple[str, str]] = field(default_factory=list)   # (source path, name in the sandbox)
    executable: str | None = None                                # its name in the sandbox
    outputs: list[str] | None = None                             # names in the sandbox; None: what changed
    std: list[tuple[str, str]] = field(default_factory=list)     # (name in the sandbox, Out/Err as written)
    remaps: dict[str, str] = field(default_factory=dict)
    on_evict: bool = False
    snapshot: dict[str, list[float]] = field(default_factory=dict)  # the sandbox after transfer in


def _inside(rel: str, what: str) -> str:
    """A relative path normalised, refused when it climbs out of its directory."""
    norm = posixpath.normpath(rel)
    if norm == ".." or norm.startswith("../") or "\0" in rel:
        raise TransferError(f"{what} {rel!r} leaves the job's directory")
    return norm


def _string(ad: Any, attr: str) -> str | None:
    if attr not in ad:
        return None
    v = ad.evaluate(attr)
    return v if isinstance(v, str) and v else None


def _split(text: str | None) -> list[str]:
    return [w.strip() for w in (text or "").split(",") if w.strip()]


def parse_remaps(text: str) -> dict[str, str]:
    """``TransferOutputRemaps``: ``name = dest`` pairs separated by ``;`` (``\\`` escapes ``;`` and ``=``)."""
    out: dict[str, str] = {}
    buf, pairs, i = "", [], 0
    while i < len(text):
        c = text[i]
        if c == "\\" and i + 1 < len(text):
            buf += text[i + 1]
            i += 2
            continue
        if c == ";":
            pairs.append(buf)
            buf = ""
        else:
            buf += c
        i += 1
    pairs.append(buf)
    for pair in pairs:
        if not pair.strip():
            continue
        name, sep, dest = pair.partition("=")
        if not sep or not name.strip() or not dest.strip():
            raise TransferError(f"TransferOutputRemaps entry {pair.strip()!r} is not name = destination")
        out[name.strip()] = dest.strip()
    return out


def plan_from_ad(ad: ClassAd | Any, desc: JobDescription, machine_fs_domain: str | None) -> TransferPlan | None:
    """The transfer the job's ad asks for, or None when it transfers nothing (see the module docstring).
    Raises :class:`TransferError` for an entry that leaves its directory or cannot be read as written."""
    if not isinstance(ad, ClassAd) or not desc.runs_in_sandbox(machine_fs_domain):
        return None
    when = _string(ad, "WhenToTransferOutput")
    if when is None or desc.should_transfer not in ("YES", "IF_NEEDED") or desc.iwd is None:
        return None
    when = when.upper()
    if when not in ("ON_EXIT", "ON_EXIT_OR_EVICT", "ON_SUCCESS"):
        raise TransferError(f"WhenToTransferOutput {when!r} is not ON_EXIT or ON_EXIT_OR_EVICT")
    iwd = desc.iwd
    if not os.path.isabs(iwd):
        raise TransferError(f"the job's Iwd {iwd!r} is not an absolute path")
    plan = TransferPlan(iwd=posixpath.normpath(iwd), on_evict=when == "ON_EXIT_OR_EVICT")
    taken: set[str] = set()

    def add_input(entry: str, what: str) -> None:
        src = entry if os.path.isabs(entry) else posixpath.join(plan.iwd, _inside(entry, what))
        contents = entry.endswith("/") and len(entry) > 1
        name = "." if contents else posixpath.basename(posixpath.normpath(src))
        if name in taken and name != ".":
            return
        taken.add(name)
        plan.inputs.append((src + ("/" if contents else ""), name))

    if desc.cmd and ad.evaluate("TransferExecutable") is not False:
        cmd = desc.cmd
        src = cmd if os.path.isabs(cmd) else posixpath.join(plan.iwd, _inside(cmd, "the job's Cmd"))
        plan.executable = posixpath.basename(src)
        plan.inputs.append((src, plan.executable))
        taken.add(plan.executable)
    if desc.stdin and desc.stdin != os.devnull and ad.evaluate("TransferIn") is not False:
        add_input(desc.stdin, "the job's In")
    for entry in _split(_string(ad, "TransferInput")):
        if "://" in entry:
            raise TransferError(f"the input {entry!r} is a URL: this starter has no transfer plugins")
        add_input(entry, "the input")
    out_text = _string(ad, "TransferOutput")
    if "TransferOutput" in ad:
        plan.outputs = [_inside(e, "the output") for e in _split(out_text)]
        for e in plan.outputs:
            if os.path.isabs(e):
                raise TransferError(f"the output {e!r} is an absolute path: outputs are named in the sandbox")
    for attr, local, xfer in (("Out", STDOUT_NAME, "TransferOut"), ("Err", STDERR_NAME, "TransferErr")):
        value = _string(ad, attr)
        if value and value != os.devnull and ad.evaluate(xfer) is not False:
            if attr == "Err" and value == _string(ad, "Out"):
                local = STDOUT_NAME
            else:
                plan.std.append((local, value))
    remaps = _string(ad, "TransferOutputRemaps")
    if remaps:
        plan.remaps = parse_remaps(remaps)
        for dest in plan.remaps.values():
            if not os.path.isabs(dest):
                _inside(dest, "the remap destination")
    return plan


def local_std_files(plan: TransferPlan) -> tuple[str | None, str | None]:
    """Where the job's stdout and stderr go in the sandbox (relative names), as JICShadow renames them."""
    out = err = None
    for local, written in plan.std:
        if local == STDOUT_NAME:
            out = local
        else:
            err = local
    return out, err


def _dest(plan: TransferPlan, name: str, written: str | None = None) -> str:
    """Where an output goes: its remap, else Out/Err as written, else its base name, under Iwd."""
    base = posixpath.basename(name)
    target = plan.remaps.get(name) or plan.remaps.get(base) or written or base
    return target if os.path.isabs(target) else posixpath.join(plan.iwd, _inside(target, "the output destination"))


def out_spec(plan: TransferPlan) -> dict[str, Any]:
    """The helper's instructions for the transfer out."""
    files: list[list[Any]] = []
    for local, written in plan.std:
        files.append([local, _dest(plan, local, written), False])
    if plan.outputs is not None:
        for name in plan.outputs:
            files.append([name, _dest(plan, name), True])
        return {"op": "out", "files": files, "scan": None}
    skip = [local for local, _ in plan.std] + ([plan.executable] if plan.executable else [])
    return {"op": "out", "files": files, "scan": {"snapshot": plan.snapshot, "skip": skip,
                                                 "dests": {k: _dest(plan, k) for k in plan.remaps},
                                                 "iwd": plan.iwd}}


async def run_helper(spec: dict[str, Any], account: Any, timeout: float = TRANSFER_TIMEOUT) -> dict[str, Any]:
    """Run the copying helper as ``account`` (a :class:`~startd.starter.runas.Account`) with ``spec``; its
    JSON answer. Raises :class:`TransferError` with its one-line reason."""
    spec = dict(spec)
    if getattr(account, "switch", False):
        # the helper is exec'd while still root (the job's account need not reach the interpreter, as for the
        # launcher of create_process) and becomes the account before it touches a file
        spec["as"] = [account.uid, account.gid, list(account.groups)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-S", "-c", HELPER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd="/", env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    try:
        raw, _ = await asyncio.wait_for(proc.communicate(json.dumps(spec).encode()), timeout)
    except asyncio.TimeoutError:
        proc.kill()
        await proc.wait()
        raise TransferError(f"the transfer took longer than {int(timeout)} s and was given up") from None
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    try:
        answer = json.loads(raw.decode() or "{}")
    except ValueError:
        answer = {}
    if not isinstance(answer, dict) or "error" in answer or not answer.get("ok"):
        raise TransferError(str(answer.get("error") if isinstance(answer, dict) else "") or
                            f"the transfer helper failed (exit {proc.returncode})")
    return answer


async def transfer_in(plan: TransferPlan, sandbox: str, account: Any) -> int:
    """Copy the inputs into the sandbox as the job's account; returns the bytes copied."""
    spec = {"op": "in", "sandbox": sandbox, "inputs": plan.inputs, "exe": plan.executable, "max": MAX_ENTRIES}
    answer = await run_helper(spec, account)
    plan.snapshot = answer.get("snapshot", {})
    return int(answer.get("bytes", 0))


async def transfer_out(plan: TransferPlan, sandbox: str, account: Any) -> int:
    """Copy the outputs back as the job's account, all or nothing; returns the bytes copied."""
    spec = out_spec(plan)
    spec["sandbox"] = sandbox
    answer = await run_helper(spec, account)
    return int(answer.get("bytes", 0))


#: The helper: stdlib only, run as ``python -I -S -c`` by the job's account; JSON in on stdin, out on stdout.
HELPER = r"""
import json, os, sys, stat, secrets

def fail(msg):
    sys.stdout.write(json.dumps({"error": msg})); sys.stdout.flush(); os._exit(0)

def copy_file(src_fd, dst_path, mode):
    fd = os.open(dst_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    n = 0
    try:
        while True:
            buf = os.read(src_fd, 1 << 20)
            if not buf:
                break
            os.write(fd, buf); n += len(buf)
    finally:
        os.close(fd)
    return n

def open_src(path, follow):
    flags = os.O_RDONLY | (0 if follow else os.O_NOFOLLOW)
    return os.open(path, flags)

def copy_tree(src, dst, follow, budget):
    total = 0
    st = os.stat(src) if follow else os.lstat(src)
    if stat.S_ISLNK(st.st_mode):
        raise OSError(40, "is a symbolic link, which is not followed")
    if stat.S_ISDIR(st.st_mode):
        if not os.path.isdir(dst):
            os.mkdir(dst, 0o755)
        for e in os.scandir(src):
            budget[0] -= 1
            if budget[0] < 0:
                raise OSError(27, "too many files")
            if e.is_symlink():
                continue
            total += copy_tree(e.path, os.path.join(dst, e.name), False, budget)
        return total
    if not stat.S_ISREG(st.st_mode):
        raise OSError(22, "is not a regular file")
    fd = open_src(src, follow)
    try:
        return copy_file(fd, dst, 0o644 | (st.st_mode & 0o111))
    finally:
        os.close(fd)

def snapshot(sandbox):
    out = {}
    for e in os.scandir(sandbox):
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        out[e.name] = [st.st_mtime, st.st_size]
    return out

def do_in(spec):
    sandbox = spec["sandbox"]; total = 0; budget = [spec.get("max", 100000)]
    for src, name in spec["inputs"]:
        shown = src
        try:
            if src.endswith("/"):
                if not os.path.isdir(src):
                    raise OSError(20, "Not a directory")
                for e in os.scandir(src):
                    if not e.is_symlink():
                        total += copy_tree(e.path, os.path.join(sandbox, e.name), False, budget)
            else:
                total += copy_tree(src, os.path.join(sandbox, name), True, budget)
        except OSError as e:
            fail("the input file %r cannot be transferred: %s" % (shown, e.strerror or e))
    exe = spec.get("exe")
    if exe:
        p = os.path.join(sandbox, exe)
        try:
            os.chmod(p, os.stat(p).st_mode | 0o755)
        except OSError as e:
            fail("the executable %r cannot be made executable: %s" % (exe, e.strerror))
    return {"ok": True, "bytes": total, "snapshot": snapshot(sandbox)}

def do_out(spec):
    sandbox = spec["sandbox"]; files = list(spec["files"]); scan = spec.get("scan")
    if scan is not None:
        before = scan["snapshot"]; skip = set(scan["skip"])
        for name, (mt, sz) in sorted(snapshot(sandbox).items()):
            if name in skip or name.startswith("_condor_") or name.startswith(".startd-"):
                continue
            p = os.path.join(sandbox, name)
            if not os.path.isfile(p) or os.path.islink(p):
                continue
            old = before.get(name)
            if old is not None and old[0] == mt and old[1] == sz:
                continue
            files.append([name, scan["dests"].get(name) or os.path.join(scan["iwd"], name), True])
    temps = []; total = 0
    try:
        for name, dest, required in files:
            src = os.path.join(sandbox, name)
            try:
                fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW)
            except OSError as e:
                if not required and e.errno == 2:
                    continue
                raise OSError(e.errno, "the output file %r cannot be read in the sandbox: %s" % (name, e.strerror))
            try:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    raise OSError(21, "the output %r is not a regular file" % name)
                tmp = os.path.join(os.path.dirname(dest) or ".", ".startd-xfer-%s-%s" % (secrets.token_hex(4), os.path.basename(dest)))
                try:
                    total += copy_file(fd, tmp, 0o644)
                except OSError as e:
                    raise OSError(e.errno, "the output %r cannot be written to %s: %s" % (name, dest, e.strerror))
                temps.append((tmp, dest))
            finally:
                os.close(fd)
        for tmp, dest in temps:
            if os.path.isdir(dest) and not os.path.islink(dest):
                raise OSError(21, "the output destination %s is a directory" % dest)
        for tmp, dest in temps:
            os.rename(tmp, dest)
        temps = []
    except OSError as e:
        for tmp, _ in temps:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        fail(str(e.strerror or e))
    return {"ok": True, "bytes": total}

try:
    spec = json.loads(sys.stdin.read())
    who = spec.get("as")
    if who:
        os.setgroups(who[2]); os.setgid(who[1]); os.setuid(who[0])
        if os.getuid() == 0 or os.geteuid() == 0:
            fail("the transfer helper could not leave root")
    result = do_in(spec) if spec["op"] == "in" else do_out(spec)
except Exception as e:
    fail("the transfer failed: %s" % e)
sys.stdout.write(json.dumps(result))
"""
