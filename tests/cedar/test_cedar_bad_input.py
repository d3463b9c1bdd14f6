"""What a hostile or broken client gets from the listener: garbage, a packet over 1 MiB, half a message,
a stall, hundreds of idle connections, a malformed security ad. Each connection is closed and logged
once, nothing the client sends before authorization is read beyond a bound, and the listener goes on
answering the ``htcondor`` wheel (ReliSock::RcvMsg::rcv_packet, getPODClassAd, daemon core's 20 s
command socket timeout).
"""

from __future__ import annotations

import socket
import struct
import time

import structlog
from cedarkit import QUERY, Client

from startd.cedar.classad_wire import put_classad
from startd.cedar.codec import Encoder
from startd.classad import ClassAd


def _closed_within(s: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``s`` within ``seconds`` (reading and dropping what it may send)."""
    s.settimeout(seconds)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except (TimeoutError, socket.timeout):
        return False
    return False


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


def _still_answers(server, client: Client) -> None:
    out = client.run(QUERY + f"result = query({server.address!r}, 'true', ['Name'])")
    assert len(out) == 3, out


def _closures(logs: list[dict]) -> list[dict]:
    return [e for e in logs if e["event"] == "cedar connection closed"]


def _packet(body: bytes) -> bytes:
    """``body`` as one ReliSock packet, the last of its message."""
    return struct.pack(">Bi", 1, len(body)) + body


def _sent_and_closed(port: int, data: bytes) -> list[dict]:
    """What the server logged while ``data`` was sent on a new connection, which it must close within 5 s."""
    with structlog.testing.capture_logs() as logs:
        with _connect(port) as s:
            s.sendall(data)
            assert _closed_within(s, 5)
    return logs


def test_garbage_bytes_close_the_connection(cedar_server, client: Client) -> None:
    """An unrecognised packet header (rcv_packet: the end flag is 0..10): closed, logged once."""
    server = cedar_server()
    [closed] = _closures(_sent_and_closed(server.port, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
    assert "unrecognised packet header" in closed["reason"]
    _still_answers(server, client)


def test_a_packet_over_one_mebibyte_is_refused_before_its_body_is_read(cedar_server, client: Client) -> None:
    """rcv_packet: a body over 1 MiB is refused from its header alone."""
    server = cedar_server()
    [closed] = _closures(_sent_and_closed(server.port, struct.pack(">Bi", 1, 1024 * 1024 + 1) + b"x" * 100))
    assert "over the 1 MiB limit" in closed["reason"]
    _still_answers(server, client)


def test_a_large_message_before_authorization_is_refused_from_its_header(cedar_server) -> None:
    """Before the client is authorized a message may hold 64 KiB: a header announcing more is refused at
    once, so an unauthenticated client never makes the server hold more than that."""
    server = cedar_server()
    [closed] = _closures(_sent_and_closed(server.port, struct.pack(">Bi", 0, 60 * 1024) + b"\0" * (60 * 1024) + struct.pack(">Bi", 1, 8 * 1024)))
    assert "more than 65536 bytes" in closed["reason"]


def test_half_a_message_then_hanging_up(cedar_server, client: Client) -> None:
    """A header promising 100 bytes, 40 sent, then the client goes: closed, logged once."""
    server = cedar_server()
    with structlog.testing.capture_logs() as logs:
        with _connect(server.port) as s:
            s.sendall(struct.pack(">Bi", 1, 100) + b"\0" * 40)
            s.shutdown(socket.SHUT_WR)
            assert _closed_within(s, 5)
    [closed] = _closures(logs)
    assert "in the middle of a message" in closed["reason"]
    _still_answers(server, client)


def test_a_client_that_stalls_is_cut_off_by_the_read_timeout(cedar_server, client: Client) -> None:
    """STARTD_CEDAR_READ_TIMEOUT bounds how long one message may take: a client that sends half a header and
    waits, or a byte now and then, is closed once it is up."""
    server = cedar_server(read_timeout=1.0)
    with structlog.testing.capture_logs() as logs:
        with _connect(server.port) as trickle, _connect(server.port) as silent:
            trickle.sendall(b"\x01\x00")
            for _ in range(4):
                time.sleep(0.4)
                try:
                    trickle.sendall(b"\x00")
                except OSError:
                    break
            assert _closed_within(trickle, 5)
            assert _closed_within(silent, 5)
    closed = _closures(logs)
    assert len(closed) == 2 and all("no whole message within 1 s" in e["reason"] for e in closed)
    _still_answers(server, client)


def test_hundreds_of_idle_connections_cannot_keep_a_client_out(cedar_server, client: Client) -> None:
    """STARTD_CEDAR_MAX_CONNECTIONS caps the connections open at once: 300 idle ones leave at most that many
    open, the cap is logged once, and a real client still gets its answer (idle connections make room)."""
    server = cedar_server(max_connections=16, read_timeout=30.0)
    idle: list[socket.socket] = []
    with structlog.testing.capture_logs() as logs:
        try:
            for _ in range(300):
                idle.append(_connect(server.port))
            time.sleep(1.5)
            assert server.server.open_connections <= 16
            _still_answers(server, client)
            _still_answers(server, client)
        finally:
            for s in idle:
                s.close()
    assert len([e for e in logs if e["event"].startswith("cedar connection limit reached")]) == 1


def test_a_security_ad_with_an_expression_is_refused(cedar_server, client: Client) -> None:
    """getPODClassAd: before authentication only literals are read; an expression ends the connection."""
    server = cedar_server()
    ad = ClassAd()
    ad.set_expr("Command", "2 + 3")
    enc = Encoder(False).put_int(60010)
    put_classad(enc, ad)
    body = enc.getvalue()
    [closed] = _closures(_sent_and_closed(server.port, _packet(body)))
    assert "is not a literal" in closed["reason"]
    _still_answers(server, client)


def test_a_security_ad_of_too_many_attributes_is_refused(cedar_server) -> None:
    """getPODClassAd reads at most 100 attributes."""
    server = cedar_server()
    enc = Encoder(False).put_int(60010).put_int(101)
    body = enc.getvalue()
    [closed] = _closures(_sent_and_closed(server.port, _packet(body)))
    assert "announces 101 attributes" in closed["reason"]


def test_an_unregistered_command_is_closed(cedar_server) -> None:
    """A number the startd does not serve (here REQUEST_CLAIM, 442: the claim protocol is not on this wire):
    the connection is closed, logged once."""
    server = cedar_server()
    body = Encoder(False).put_int(442).getvalue()
    logs = _sent_and_closed(server.port, _packet(body))
    assert [e["number"] for e in logs if e["event"] == "unregistered command"] == [442]
