"""The embedded MQTT broker (amqtt), for a daemon given no broker.

It listens on 127.0.0.1 only, so only local processes reach it. The port is ``STARTD_BROKER_PORT``
(default 1883), or a free one when that is taken (a system Mosquitto often holds 1883).

It runs in a process of its own (:mod:`startd.transport.broker_process`), which the daemon starts,
supervises and stops: the daemon binds the listening socket and hands it to that process, so the port stays
the daemon's for its whole life. When the broker process dies it is started again on the same socket
(clients connecting meanwhile wait in its backlog) and the daemon's connection reconnects and publishes
its ads again, as it does after any broker restart. It ends with the daemon, whichever way the daemon ends.

Clients may connect anonymously, or with a user name; with ``STARTD_BROKER_PASSWORD_FILE`` set (amqtt's
password file: ``user:hash`` lines, argon2 or bcrypt hashes) only listed users with their password may
connect. Either way the broker enforces the identity rule of :mod:`startd.transport.broker_users`: a client may
publish on ``.../command/U`` only when its user name is U, so the daemon can trust the user the topic
names (commands on the bare ``.../command`` topic count as anonymous, whoever sent them). And it refuses a
packet larger than ``max_packet_bytes`` (``STARTD_MAX_COMMAND_BYTES`` plus :data:`ENVELOPE_BYTES`) from
any client but the daemon before reading it, as Mosquitto does with ``max_packet_size``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import socket
import sys
from pathlib import Path
from typing import Self

import structlog

from .tasks import cancel_and_wait

log = structlog.get_logger("startd.transport")

DEFAULT_PORT = 1883
HOST = "127.0.0.1"
#: what an MQTT packet carries around a command's payload: the fixed header (at most 5 bytes), the topic
#: (at most 65,535 bytes and its length), the packet identifier, and 4 KiB for MQTT 5 properties (a
#: response topic and correlation data)
ENVELOPE_BYTES = 64 * 1024 + 4096
#: the packet limit with the default STARTD_MAX_COMMAND_BYTES (1 MiB): Mosquitto's ``max_packet_size``
DEFAULT_MAX_PACKET_BYTES = (1 << 20) + ENVELOPE_BYTES
#: a broker process that lived this long before it died is started again at once; one that died sooner
#: waits (doubling, up to RESTART_MAX_DELAY), so a broker that cannot start is not started in a loop
RESTART_SETTLED = 10.0
RESTART_MAX_DELAY = 10.0
#: the package root the broker process imports startd from: the daemon's own copy
_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)


def _listen(port: int, fallback_to_free_port: bool) -> socket.socket:
    """The broker's listening socket on 127.0.0.1: ``port``, or a free one when it is taken and allowed."""
    def bound(p: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted daemon's port in TIME_WAIT
            s.bind((HOST, p))
            s.listen(socket.SOMAXCONN)
        except BaseException:
            s.close()
            raise
        return s

    try:
        return bound(port)
    except OSError as e:
        if e.errno != errno.EADDRINUSE or port == 0:
            raise OSError(e.errno, f"cannot listen on {HOST}:{port} for the embedded MQTT broker: {e.strerror}") from None
        if not fallback_to_free_port:
            raise OSError(errno.EADDRINUSE, f"port {port} on {HOST} is in use") from None
    log.info("broker port in use, taking a free one", port=port)
    return bound(0)


class EmbeddedBroker:
    """An amqtt broker on 127.0.0.1 in a process of its own, supervised by the running event loop.

    >>> broker = EmbeddedBroker(port=1883)        # doctest: +SKIP
    >>> url = await broker.start()                # "mqtt://127.0.0.1:<port>"
    >>> await broker.stop()
    """

    def __init__(self, port: int | None = DEFAULT_PORT, *, password_file: str | None = None,
                 fallback_to_free_port: bool = True, max_packet_bytes: int = DEFAULT_MAX_PACKET_BYTES) -> None:
        self.requested_port = port or 0
        self.password_file = password_file
        self.fallback_to_free_port = fallback_to_free_port
        self.max_packet_bytes = max_packet_bytes
        self.port: int | None = None
        #: how many times the broker process was started again after it died
        self.restarts = 0
        self._socket: socket.socket | None = None
        self._process: asyncio.subprocess.Process | None = None
        self._supervisor: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """Where clients connect. Only meaningful once started."""
        if self.port is None:
            raise RuntimeError("the embedded broker is not running")
        return f"mqtt://{HOST}:{self.port}"

    @property
    def running(self) -> bool:
        return self._socket is not None

    @property
    def pid(self) -> int | None:
        """The broker process's pid (None while it is being started again, or when stopped)."""
        p = self._process
        return p.pid if p is not None and p.returncode is None else None

    async def start(self) -> str:
        """Listen, start the broker process and return the URL. Raises :class:`OSError` when no port can be
        had, ValueError when the password file cannot be read. Connections made before the process is
        ready wait in the listening socket's backlog."""
        if self._socket is not None:
            return self.url
        if self.password_file:
            try:
                Path(self.password_file).read_bytes()
            except OSError as e:
                raise ValueError(f"STARTD_BROKER_PASSWORD_FILE: cannot read {self.password_file}: "
                                 f"{e.strerror or e}") from None
        self._socket = _listen(self.requested_port, self.fallback_to_free_port)
        self.port = int(self._socket.getsockname()[1])
        try:
            self._process = await self._spawn()
        except BaseException:
            self._socket.close()
            self._socket = None
            raise
        self._supervisor = asyncio.create_task(self._supervise(), name="embedded-broker-supervisor")
        log.info("embedded broker started", url=self.url, pid=self._process.pid)
        return self.url

    async def _spawn(self) -> asyncio.subprocess.Process:
        assert self._socket is not None
        fd = self._socket.fileno()
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "startd.transport.broker_process",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            pass_fds=(fd,), cwd=_PACKAGE_ROOT, close_fds=True)
        settings = {"fd": fd, "max_packet_bytes": self.max_packet_bytes, "daemon_pid": os.getpid(),
                    "password_file": self.password_file}
        assert process.stdin is not None
        process.stdin.write(json.dumps(settings).encode() + b"\n")
        return process

    async def _supervise(self) -> None:
        """Log what the broker process says; start it again when it dies (until :meth:`stop`)."""
        loop = asyncio.get_running_loop()
        delay = 0.0
        while True:
            process = self._process
            assert process is not None
            began = loop.time()
            last_words = await self._relay(process)
            code = await process.wait()
            delay = 0.0 if loop.time() - began >= RESTART_SETTLED else min(max(delay * 2, 0.25), RESTART_MAX_DELAY)
            log.error("embedded broker exited; starting it again", code=code, pid=process.pid,
                      restarts=self.restarts + 1, delay=delay, **({"said": last_words} if last_words else {}))
            await asyncio.sleep(delay)
            try:
                self._process = await self._spawn()
            except OSError as e:
                log.error("embedded broker could not be started again", error=str(e))
                delay = RESTART_MAX_DELAY
                continue
            self.restarts += 1

    async def _relay(self, process: asyncio.subprocess.Process) -> str | None:
        """Log the broker process's lines until it closes its output; returns the last line it wrote that
        was not one of ours (a Python error that ended it, such as amqtt missing)."""
        assert process.stdout is not None
        other: str | None = None
        while line := await process.stdout.readline():
            try:
                said = json.loads(line)
                event = said.pop("event")
            except (ValueError, KeyError, TypeError, AttributeError):
                other = line.decode(errors="replace").strip()[:300] or other
                continue
            if event == "ready":
                log.debug("embedded broker ready", url=self.url, **said)
            elif event == "refused":
                log.warning("embedded broker refused a packet over its limit", **said)
            elif event == "limit":
                log.info("embedded broker packet limit", **said)
            else:
                log.error("embedded broker failed", **said)
        return other

    def set_max_packet_bytes(self, limit: int) -> None:
        """A new packet limit (a reconfig changed ``STARTD_MAX_COMMAND_BYTES``): the broker process holds
        every packet whose header arrives from then on to it, on the connections open and the new ones; a
        broker process started again takes it too."""
        if limit == self.max_packet_bytes:
            return
        self.max_packet_bytes = limit
        process = self._process
        if process is not None and process.returncode is None and process.stdin is not None \
                and not process.stdin.is_closing():
            process.stdin.write(json.dumps({"max_packet_bytes": limit}).encode() + b"\n")

    async def stop(self, timeout: float = 5.0) -> None:
        """Stop the broker process (it closes every connection) and stop listening, within ``timeout``
        (+ 0.5 s): the process is asked by closing its standard input, and killed when it does not end in
        time. Safe to call twice."""
        listening, self._socket = self._socket, None
        if listening is None:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            if self._supervisor is not None:  # no restart from here on
                await cancel_and_wait([self._supervisor], min(0.25, timeout), what="embedded broker supervisor")
            process = self._process
            if process is not None and process.returncode is None:
                await _end(process, max(deadline - loop.time(), 0.0))
        finally:
            self._process = self._supervisor = None
            listening.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def _end(process: asyncio.subprocess.Process, timeout: float) -> None:
    """Close the process's standard input (it shuts down), then SIGKILL it when it is still there after
    ``timeout``; reap it either way (within 0.5 s more)."""
    if process.stdin is not None:
        process.stdin.close()
    try:
        await asyncio.wait_for(process.wait(), timeout)
        return
    except TimeoutError:
        log.warning("embedded broker did not stop in time; killing it", pid=process.pid, timeout=timeout)
    except asyncio.CancelledError:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        raise
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 0.5)
