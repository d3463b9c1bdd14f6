"""Helpers of the CEDAR tests: a listener with a stand-in for the daemon, the ``htcondor`` wheel as the
client (in a subprocess of its own: it keeps sessions and configuration for the life of a process),
tokens, and a loopback relay that records what crosses the wire.

Everything started here is stopped by the fixtures (tests/cedar/conftest.py): the listener's thread
and loop, the relay, and every subprocess (each run with a timeout and killed by its PID on overrun).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import struct
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Coroutine

from startd import config
from startd.cedar import AdQuery, CedarSecurity, CedarServer, Outcome, ServerPolicy, TokenAuthority
from startd.cedar.classad_wire import get_classad, put_classad
from startd.cedar.codec import Decoder, Encoder
from startd.classad import ClassAd
from startd.security.authz import AuthorizationTable
from startd.security.tokens import mint
from startd.security.wire import Identity

ISSUER = "cedar.test"
#: The stand-in daemon's HS256 key (as load_signing_key gives it); tokens for it are minted with it
POOL_KEY = bytes(range(32))


def slot_ads(n: int = 3, machine: str = "host.test") -> list[ClassAd]:
    """Slot ads of a small machine, each with a claim id that must never leave it."""
    ads = []
    for i in range(1, n + 1):
        ad = ClassAd()
        ad["MyType"] = "Machine"
        ad["Name"] = f"slot{i}@{machine}"
        ad["Machine"] = machine
        ad["State"] = "Unclaimed" if i != 2 else "Claimed"
        ad["Activity"] = "Idle" if i != 2 else "Busy"
        ad["Memory"] = 1024 * i
        ad["Cpus"] = 1
        ad["ClaimId"] = f"<127.0.0.1:1>#1#{i}#secret{i}"
        ad["_condor_privSecret"] = "hidden"
        ad.set_expr("Rank", "Memory * 2")
        ads.append(ad)
    return ads


def daemon_ad(machine: str = "host.test") -> ClassAd:
    ad = ClassAd()
    ad["MyType"] = "StartD"
    ad["Name"] = machine
    ad["Machine"] = machine
    return ad


class FakeBackend:
    """The daemon's side, recorded: its ads, and every command handed to it with who sent it."""

    def __init__(self) -> None:
        self.slots = slot_ads()
        self.daemon = daemon_ad()
        self.commands: list[tuple[dict[str, Any], Identity]] = []
        self.answer: Callable[[dict[str, Any]], Outcome] = lambda cmd: Outcome(True, None, {"drain_id": "7"})

    async def query(self, query: AdQuery) -> None:
        if query.wants_daemon:
            query.offer(self.daemon)
        if query.wants_slots:
            for ad in self.slots:
                if not query.offer(ad):
                    break

    async def run(self, command: dict[str, Any], identity: Identity) -> Outcome:
        self.commands.append((command, identity))
        return self.answer(command)


def security(config_text: str = "") -> CedarSecurity:
    """What the stand-in daemon checks, from configuration text (its TRUST_DOMAIN is :data:`ISSUER`)."""
    conf = config.load(text=f"TRUST_DOMAIN = {ISSUER}\n" + config_text)
    table = AuthorizationTable.from_config(conf)
    return CedarSecurity(table, ServerPolicy.from_config(conf, table, ISSUER), TokenAuthority(POOL_KEY, ISSUER))


class ServerThread:
    """A :class:`CedarServer` on 127.0.0.1, on an event loop of its own in a thread."""

    def __init__(self, backend: FakeBackend, sec: CedarSecurity, **kwargs: Any) -> None:
        self.backend = backend
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="cedar-test-server", daemon=True)
        self.thread.start()
        self.server = CedarServer(backend, sec, **kwargs)
        self.call(self.server.start())

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 10) -> Any:
        """Run ``coro`` on the server's loop and wait for it."""
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    @property
    def address(self) -> str:
        return self.server.address

    @property
    def port(self) -> int:
        return self.server.port

    def stop(self) -> None:
        try:
            self.call(self.server.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


def bare_command(port: int, number: int, ad: ClassAd) -> ClassAd:
    """Command ``number`` with its ad sent to the listener at ``port`` without negotiation (one packet),
    and the ad it answers with."""
    enc = Encoder(False).put_int(number)
    put_classad(enc, ad)
    body = enc.getvalue()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">Bi", 1, len(body)) + body)
        f = s.makefile("rb")
        header = f.read(5)
        data = f.read(struct.unpack(">i", header[1:])[0])
    return get_classad(Decoder(data, False))


def write_token(directory: Path, token: str, name: str = "token") -> Path:
    """A token file as condor_token_create writes one: mode 0600 in a 0700 directory."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = directory / name
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def token(identity: str = "condor@cedar.test", *, key: bytes = POOL_KEY, issuer: str = ISSUER,
          authz: tuple[str, ...] = (), lifetime: int | None = None) -> str:
    return mint(key, identity=identity, issuer=issuer, authz=authz, lifetime=lifetime)


class Client:
    """The ``htcondor`` wheel in a subprocess: its own configuration file and token directory."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.config = home / "condor_config"
        self.tokens = home / "tokens.d"
        self.tokens.mkdir(mode=0o700, parents=True, exist_ok=True)
        # a configuration of its own, so the wheel reads no system one; no pool key it could sign with
        self.config.write_text(f"SEC_TOKEN_POOL_SIGNING_KEY_FILE = {home}/no-such-key\n")

    def env(self, **knobs: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("_CONDOR_")}
        env.update({"_CONDOR_CONFIG": str(self.config), "_CONDOR_SEC_TOKEN_DIRECTORY": str(self.tokens),
                    "HOME": str(self.home)})
        env.update({f"_CONDOR_{k}": v for k, v in knobs.items()})
        return env

    def run(self, body: str, *, timeout: float = 90, **knobs: str) -> Any:
        """Run ``body`` (Python using ``htcondor2``/``classad2``; it sets ``result``) and give back
        ``result`` (JSON). The wheel's exceptions are for ``body`` to catch and report."""
        script = ("import json, htcondor2, classad2\nresult = None\n" + textwrap.dedent(body)
                  + "\nprint('RESULT ' + json.dumps(result))\n")
        proc = subprocess.Popen([sys.executable, "-c", script], env=self.env(**knobs), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=str(self.home))
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError(f"the wheel's client did not finish within {timeout} s")
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        if proc.returncode != 0 or not lines:
            raise AssertionError(f"the wheel's client failed (exit {proc.returncode}):\n{out}\n{err}")
        return json.loads(lines[-1][len("RESULT "):])


#: Python run by the wheel: a query of every slot ad, each as a dict, or the exception's text
QUERY = """
def query(addr, constraint=None, projection=None, ad_type=htcondor2.AdTypes.Startd):
    try:
        ads = htcondor2.Collector(addr).query(ad_type, constraint=constraint, projection=projection or [])
        return [{k: (v if isinstance(v, (int, float, str, bool)) else str(v)) for k, v in a.items()} for a in ads]
    except Exception as e:
        return "error: " + str(e)
"""


class Relay:
    """A loopback TCP relay in front of a listener, recording every byte each way."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.to_server = bytearray()
        self.to_client = bytearray()
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def address(self) -> str:
        return f"<127.0.0.1:{self.port}>"

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            self._sockets += [client, server]
            for src, dst, buf in ((client, server, self.to_server), (server, client, self.to_client)):
                t = threading.Thread(target=self._pump, args=(src, dst, buf), daemon=True)
                t.start()
                self._threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, buf: bytearray) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                with self._lock:
                    buf.extend(data)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            try:
                dst.shutdown(socket.SHUT_WR)
            except OSError:
                pass

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        for sock in self._sockets:
            sock.close()
        for t in self._threads:
            t.join(2)


def startd_prelude(addr: str, name: str) -> str:
    """The wheel-side script's start: the daemon's location ad (``ad``, for Startd), a ``generic`` one for
    send_command (htcondor2.send_command maps MyType through AdType.from_MyType, which gives "Machine" to
    AdType.Slot, a type it has no daemon for), ``startd``, and ``attempt`` returning ["ok", value] or
    ["error", message]."""
    return f"""
addr = {addr!r}
ad = classad2.ClassAd({{"MyAddress": addr, "MyType": "Machine", "Name": {name!r}}})
generic = classad2.ClassAd({{"MyAddress": addr, "MyType": "Generic", "Name": {name!r}}})
startd = htcondor2.Startd(ad)
def attempt(f, *args, **kw):
    try:
        return ["ok", f(*args, **kw)]
    except Exception as e:
        return ["error", str(e)]
"""
