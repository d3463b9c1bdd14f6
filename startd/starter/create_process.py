"""Starting the job's process as the job's user: what HTCondor's ``DaemonCore::Create_Process`` does
in its child (``CreateProcessForkit::exec``, src/condor_daemon_core.V6/daemon_core.cpp).

The daemon does not open the job's files or enter its directories: it forks a tiny launcher, and
the launcher, once it *is* the job's user, does everything the job's rights must govern, in
HTCondor's order: switch to the user (and check it is not root), enter the working directory, find
the executable, open standard input, output and error, exec. Any failure before the exec comes back
to the daemon as one line on an error pipe that is closed on exec (``writeExecError``): the daemon
reads that pipe to its end, and an end with no words means the exec happened.

The launcher is this Python interpreter run as ``python -I -S -c <source>``: it reads nothing of the
project nor of site-packages, and it is exec'd while still root, so the job's user need not be able
to reach the interpreter. Its instructions come in a memfd (never on its command line, which every
user can read) as :mod:`marshal` data (a built-in module: importing it reads no file and costs
nothing). Before it switches user it writes its own pid into the job's cgroup, through an fd the
daemon opened: the job is in its cgroup before it runs a single instruction, so before it can fork.
The launcher's pid stays the job's pid: the exec replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import marshal
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

#: The launcher. It reports a failure as one line "E:<reason>" on the error pipe and exits 127.
LAUNCHER = r"""
import errno, marshal, os, sys, _signal

STATUS = int(sys.argv[2])


def fail(reason):
    try:
        os.write(STATUS, ("E:" + reason.replace("\n", " ") + "\n").encode("utf-8", "replace"))
    finally:
        os._exit(127)


def open_std(attr, path, write):
    if path is None:
        return os.open(os.devnull, (os.O_WRONLY if write else os.O_RDONLY) | os.O_CLOEXEC)
    # O_NONBLOCK: a FIFO must not hold the start up; O_NOFOLLOW: a symbolic link in the place of an
    # output file is never followed.
    if write:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    else:
        flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if write and e.errno == errno.ELOOP:
            fail("the job's %s file %r is a symbolic link, which is not followed" % (attr, path))
        fail("the job's %s file %r: %s" % (attr, path, e.strerror))
    os.set_blocking(fd, True)
    return fd


def find_cmd(cmd, cwd, path_var, user):
    if cmd.startswith("/"):
        path = cmd
    elif "/" in cmd or os.path.exists(cmd):
        path = os.path.join(cwd, cmd)
    else:
        for d in path_var.split(":"):
            cand = os.path.join(d or ".", cmd)
            if os.path.isfile(cand) and os.access(cand, os.X_OK):
                path = os.path.join(cwd, cand)
                break
        else:
            fail("the job's Cmd %r was not found" % cmd)
    try:
        os.stat(path)
    except PermissionError as e:
        fail("%s cannot reach the job's Cmd %r: %s" % (user, path, e.strerror))
    except OSError:
        fail("the job's Cmd %r does not exist" % path)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        fail("the job's Cmd %r is not an executable file for %s" % (path, user))
    return path


def main():
    os.set_inheritable(STATUS, False)
    spec_fd, procs_fd = int(sys.argv[1]), int(sys.argv[3])
    chunks = []
    while True:
        b = os.pread(spec_fd, 1 << 20, sum(map(len, chunks)))
        if not b:
            break
        chunks.append(b)
    os.close(spec_fd)
    spec = marshal.loads(b"".join(chunks))
    if procs_fd >= 0:
        try:
            os.write(procs_fd, str(os.getpid()).encode())
        except OSError:
            pass  # the daemon sees the job outside the cgroup and does without it
        os.close(procs_fd)
    # What a freshly started process has: every signal at its default. The interpreter ignores SIGPIPE
    # and SIGXFSZ, and a daemon started under nohup, or in the background by a shell, ignores SIGHUP,
    # SIGINT or SIGQUIT: none of that reaches the job (HTCondor's starter handles SIGHUP, SIGTERM,
    # SIGQUIT, SIGCHLD and SIGUSR1/2 itself, dc_main, so exec gives its job their defaults whatever
    # the master was started under).
    for sig in _signal.valid_signals():
        if sig not in (_signal.SIGKILL, _signal.SIGSTOP):
            try:
                _signal.signal(sig, _signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
    user = spec["user"]
    if spec["uid"] is not None:
        uid, gid = spec["uid"], spec["gid"]
        try:
            os.setgroups(spec["groups"])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
        except OSError as e:
            fail("cannot switch to %s (uid %d): %s" % (user, uid, e.strerror))
        if 0 in os.getresuid() or os.getresuid() != (uid, uid, uid):
            fail("the job would run as root, which it never does")  # ERRNO_EXEC_AS_ROOT
    cwd = spec["cwd"]
    try:
        os.chdir(cwd)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            fail("the job's Iwd %r is not a directory (%s)" % (cwd, e.strerror))
        fail("%s cannot enter the job's Iwd %r: %s" % (user, cwd, e.strerror))
    path = find_cmd(spec["cmd"], cwd, spec["path"], user)
    fin = open_std("In", spec["in"], False)
    fout = open_std("Out", spec["out"], True)
    ferr = fout if spec["err_is_out"] else open_std("Err", spec["err"], True)
    os.dup2(fin, 0)
    os.dup2(fout, 1)
    os.dup2(ferr, 2)
    for fd in {fin, fout, ferr}:
        if fd > 2:
            os.close(fd)
    try:
        os.execve(path, [path] + spec["args"], spec["env"])
    except OSError as e:
        fail("cannot execute %s: %s" % (path, e.strerror))


try:
    main()
except BaseException as e:
    fail("the job's launcher failed: %s: %s" % (type(e).__name__, e))
"""


class LaunchError(Exception):
    """The job's process could not be started; ``reason`` says why in words fit for the job's owner."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class LaunchSpec:
    """What the launcher does. ``uid`` None: no user switch (a daemon that is not root). Paths are
    absolute, except ``cmd`` (resolved by the launcher as the job's user, in ``cwd``, then along
    ``path``). ``stdin``/``stdout``/``stderr`` None: /dev/null; ``err_is_out``: one file for both."""

    user: str
    uid: int | None
    gid: int
    groups: tuple[int, ...]
    cwd: str
    cmd: str
    path: str
    args: tuple[str, ...]
    env: dict[str, str]
    stdin: str | None
    stdout: str | None
    stderr: str | None
    err_is_out: bool

    def encoded(self) -> bytes:
        spec: dict[str, Any] = {
            "user": self.user, "uid": self.uid, "gid": self.gid, "groups": list(self.groups),
            "cwd": self.cwd, "cmd": self.cmd, "path": self.path, "args": list(self.args),
            "env": dict(self.env), "in": self.stdin, "out": self.stdout, "err": self.stderr,
            "err_is_out": self.err_is_out,
        }
        return marshal.dumps(spec)


def interpreter() -> str:
    """The launcher's interpreter: this process's own, by its real path (a venv's python may be a
    symbolic link into a directory only the daemon can search, which does not matter as the launcher
    is exec'd before it switches user)."""
    return os.path.realpath(sys.executable)


def _reason(text: bytes) -> str:
    words = text.decode("utf-8", "replace")
    if words.startswith("E:"):
        return words[2:].splitlines()[0].strip() if words[2:].strip() else "the job could not be started"
    # Not the launcher's own words: the interpreter itself failed (its stderr is the error pipe).
    lines = [ln.strip() for ln in words.splitlines() if ln.strip()]
    return "the job's launcher failed: " + (lines[-1] if lines else "no reason given")


async def _read_to_end(fd: int, timeout: float) -> bytes:
    """Everything written on the error pipe until its last writer closes it (the exec, or the
    launcher's exit), without blocking the event loop."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[bytes] = loop.create_future()
    chunks: list[bytes] = []
    os.set_blocking(fd, False)

    def readable() -> None:
        try:
            b = os.read(fd, 4096)
        except BlockingIOError:
            return
        except OSError:
            b = b""
        if b and sum(map(len, chunks)) < 65536:
            chunks.append(b)
        elif not b and not done.done():
            done.set_result(b"".join(chunks))

    loop.add_reader(fd, readable)
    try:
        return await asyncio.wait_for(done, timeout)
    finally:
        loop.remove_reader(fd)


async def create_process(spec: LaunchSpec, *, cgroup_procs_fd: int | None = None, timeout: float = 30.0) -> subprocess.Popen[bytes]:
    """Start the job described by ``spec`` as a session leader; returns once its program is exec'd.
    ``cgroup_procs_fd``: an fd on the job's cgroup.procs (opened by the daemon) the launcher joins
    before anything else. Raises :class:`LaunchError` with the reason when the job cannot start, or
    when the launcher has not exec'd within ``timeout`` seconds (it is then killed)."""
    python = interpreter()
    spec_fd = os.memfd_create("startd-job-spec", os.MFD_CLOEXEC)
    err_r, err_w = os.pipe()  # both close-on-exec here; pass_fds makes the write end the child's
    try:
        os.write(spec_fd, spec.encoded())
        pass_fds = [spec_fd, err_w] + ([cgroup_procs_fd] if cgroup_procs_fd is not None else [])
        argv = [python, "-I", "-S", "-c", LAUNCHER, str(spec_fd), str(err_w),
                str(cgroup_procs_fd if cgroup_procs_fd is not None else -1)]
        try:
            # A plain Popen, not asyncio's: the job's handle reaps it itself (wait4, for its rusage).
            # Only the fork happens here; the wait for the exec below does not block the loop.
            popen = subprocess.Popen(  # noqa: ASYNC220
                argv, executable=python, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=err_w, env={}, cwd="/", start_new_session=True, close_fds=True,
                pass_fds=pass_fds,
            )
        except OSError as e:
            raise LaunchError(f"cannot start the job's launcher {python}: {e.strerror or e}") from None
    except BaseException:
        os.close(err_r)
        raise
    finally:
        os.close(spec_fd)
        os.close(err_w)
    try:
        words = await _read_to_end(err_r, timeout)
    except TimeoutError:
        _kill(popen)
        raise LaunchError(f"the job was not started within {timeout:g} s (a file or directory it needs did not answer)") from None
    except BaseException:
        _kill(popen)
        raise
    finally:
        os.close(err_r)
    if words:
        _kill(popen)
        raise LaunchError(_reason(words))
    return popen


def _kill(popen: subprocess.Popen[bytes]) -> None:
    """Make sure a launcher that did not exec is gone and reaped."""
    with contextlib.suppress(OSError):
        if popen.poll() is None:
            popen.send_signal(signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=5)
