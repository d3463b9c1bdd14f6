"""The pool tests' kit: Mosquitto brokers of the tests' own (free loopback ports, configuration files in a
temporary directory, never the system's broker), a bridge between two of them through a TCP relay that a
test can cut and restore, ``startd run`` daemons sharing one pool signing key, and the client commands.

Everything started here is ended by its PID: brokers and daemons with SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from startd.security.keys import ensure_signing_key

REPO = Path(__file__).resolve().parents[2]
MOSQUITTO = "/usr/sbin/mosquitto"
TRUST_DOMAIN = "pool.test"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, every: float = 0.1) -> Any:
    """Poll ``predicate`` until it is truthy; its value. AssertionError naming ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def _end(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """End a process this kit started: SIGTERM, then SIGKILL after ``grace`` seconds; reaped either way."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


class Mosquitto:
    """A Mosquitto of the test's own on a free loopback port; with ``bridge_to``, bridged to that address,
    every topic under ``root`` both ways (deploy/mosquitto-bridge.conf's shape)."""

    def __init__(self, where: Path, name: str, root: str, bridge_to: int | None = None) -> None:
        if not os.access(MOSQUITTO, os.X_OK):
            pytest.fail(f"{MOSQUITTO} is not installed: the pool tests need Mosquitto (apt-get install mosquitto)")
        self.name = name
        self.port = free_port()
        self.conf = where / f"{name}.conf"
        self.log = where / f"{name}.log"
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous true", "set_tcp_nodelay true",
                 "persistence false", "log_type error", "log_type warning", "log_type notice"]
        if bridge_to is not None:
            lines += [f"connection {name}-bridge", f"address 127.0.0.1:{bridge_to}", f"topic {root}/# both 1",
                      "cleansession true", "restart_timeout 1 2", "keepalive_interval 5", "notifications false",
                      "try_private true"]
        self.conf.write_text("\n".join(lines) + "\n")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT)
        wait_until(self._answers, 10, f"Mosquitto {self.name} on port {self.port}", every=0.05)

    def _answers(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"Mosquitto {self.name} exited {self.proc.returncode}: {self.log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
            return True
        return False

    def stop(self) -> None:
        if self.proc is not None:
            _end(self.proc)
            self.proc = None


class Relay:
    """A TCP relay on a free loopback port to ``target``: what a bridge crosses, so a test can cut the line
    (every connection closed, nothing accepted) and restore it (on the same port)."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.port = free_port()
        self._listener: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen(8)
        self._listener = s
        t = threading.Thread(target=self._accept, args=(s,), daemon=True, name="relay-accept")
        t.start()
        self._threads.append(t)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target), 5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns += [client, upstream]
            t = threading.Thread(target=self._pump, args=(client, upstream), daemon=True, name="relay-pump")
            t.start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 0.5)
                if a.fileno() < 0 or b.fileno() < 0:
                    return
                for s in ready:
                    data = s.recv(65536)
                    if not data:
                        return
                    peers[s].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.close()

    def cut(self) -> None:
        """Close the listener and every connection: the bridge drops and cannot come back."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() under way (close alone does not)
            self._listener.close()
            self._listener = None
        with self._lock:
            conns, self._conns = self._conns, []
        for c in conns:
            with contextlib.suppress(OSError):
                c.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                c.close()

    def restore(self) -> None:
        self.start()

    def stop(self) -> None:
        self.cut()
        for t in self._threads:
            t.join(2)


class Startd:
    """``startd run --broker URL --name NAME`` with a small static machine, the pool's signing key and
    domain, under the topic root ``root``."""

    def __init__(self, where: Path, name: str, root: str, key: Path, broker: Mosquitto, *, cpus: int = 2,
                 extra: str = "") -> None:
        self.name = name
        self.broker = broker
        self.dir = where / name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.config = self.dir / "startd.config"
        self.config.write_text(pool_config(root, key) + f"LOCAL_DIR = {self.dir}/local\nNUM_CPUS = {cpus}\n"
                               f"NUM_SLOTS = {cpus}\nSLOT_TYPE_0_PARTITIONABLE = False\nMEMORY = {cpus * 256}\n"
                               "STARTD_BROKER_PORT = 0\nSTARTD_MQTT_RECONNECT_MIN = 0.1\n"
                               "STARTD_MQTT_RECONNECT_MAX = 0.5\n" + extra)
        self.log = self.dir / "stderr.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "startd.cli", "run", "-c", str(self.config), "--broker", self.broker.url,
                 "--name", self.name], cwd=str(REPO), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.proc.pid, signal.SIGCONT)
            _end(self.proc, grace=15)
            self.proc = None


def pool_config(root: str, key: Path) -> str:
    """What every startd and client of the pool shares: the topic root, the signing key and the domain."""
    return (f"STARTD_MQTT_PREFIX = {root}\nSEC_TOKEN_POOL_SIGNING_KEY_FILE = {key}\n"
            f"TRUST_DOMAIN = {TRUST_DOMAIN}\nUID_DOMAIN = {TRUST_DOMAIN}\nRUNBENCHMARKS = False\n")


class Pool:
    """Two Mosquitto brokers, ``b`` bridged to ``a`` through :class:`Relay`, with startds on each side."""

    def __init__(self, where: Path, root: str) -> None:
        self.where = where
        self.root = root
        self.key = where / "passwords.d" / "POOL"
        ensure_signing_key({"SEC_TOKEN_POOL_SIGNING_KEY_FILE": str(self.key)})
        self.client_config = where / "client.config"
        self.client_config.write_text(pool_config(root, self.key))
        self.a = Mosquitto(where, "site-a", root)
        self.a.start()
        self.relay = Relay(self.a.port)
        self.relay.start()
        self.b = Mosquitto(where, "site-b", root, bridge_to=self.relay.port)
        self.b.start()
        self.startds: dict[str, Startd] = {}

    def add(self, name: str, broker: Mosquitto, **kw: Any) -> Startd:
        d = Startd(self.where, name, self.root, self.key, broker, **kw)
        self.startds[name] = d
        d.start()
        return d

    def cli(self, *args: str, broker: Mosquitto | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """``startd ARGS`` as the pool's administrator (its configuration: the shared key) on ``broker``
        (default: site b, the far side of the bridge from site a)."""
        command, rest = args[0], list(args[1:])
        url = (broker or self.b).url
        return subprocess.run([sys.executable, "-m", "startd.cli", command, "-c", str(self.client_config),
                               "--broker", url, *rest], cwd=str(REPO), capture_output=True, text=True,
                              timeout=timeout)

    def slots(self, broker: Mosquitto | None = None, constraint: str = "true") -> dict[str, str]:
        """Name -> "State/Activity" of every slot ``startd status`` shows on ``broker``."""
        done = self.cli("status", "-af", "Name", "State", "Activity", "-constraint", constraint, broker=broker)
        assert done.returncode in (0, 1), done.stderr
        out = {}
        for line in done.stdout.splitlines():
            parts = line.split()
            if len(parts) == 3:
                out[parts[0]] = f"{parts[1]}/{parts[2]}"
        return out

    def machines(self, broker: Mosquitto | None = None) -> set[str]:
        return {n.partition("@")[2] for n in self.slots(broker)}

    def wait_online(self, names: set[str], timeout: float = 60) -> None:
        for broker in (self.a, self.b):
            wait_until(lambda: names <= self.machines(broker), timeout,
                       f"startds {sorted(names)} online on {broker.name}", every=0.3)

    def close(self) -> None:
        for d in self.startds.values():
            d.stop()
        self.b.stop()
        self.relay.stop()
        self.a.stop()
        shutil.rmtree(self.where, ignore_errors=True)
