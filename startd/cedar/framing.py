"""ReliSock on an asyncio stream: messages made of packets, the handshake digests, and AES-GCM.

A message is one or more packets; a packet is a 5-byte header (byte 0: 1 on the last packet of the
message, else 0; bytes 1-4: the body's length, big-endian) and its body. A body over 1 MiB, or empty,
ends the connection (``ReliSock::RcvMsg::rcv_packet``, condor_io/reli_sock.cpp). A reader sees nothing
until the whole message arrived (``end_of_message``), so this module hands out whole messages.

Once a session key is set (``Sock::set_crypto_key``), every packet is sealed with AES-256-GCM
(``Condor_Crypt_AESGCM::encrypt``/``decrypt``, condor_io/condor_crypt_aesgcm.cpp; ``ReliSock::SndMsg::
snd_packet``): the body is the ciphertext and its 16-byte tag, preceded on the first packet of each
direction by the 16-byte IV that direction starts from; packet ``n`` uses that IV with its first four
bytes, read as a big-endian counter, advanced by ``n``. The header is the additional authenticated data,
and on the first sealed packet of each direction it is preceded by the SHA-256 of every plaintext byte
(headers included) this side had sent and of every one it had received before encryption began, in
that order for the sender and swapped for the receiver: a handshake tampered with in the clear fails
the first sealed packet.

Nothing here trusts the peer: every length is checked against the caller's bound before it is read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct

__all__ = ["CedarError", "PeerClosed", "ReadTimeout", "Channel", "MAX_PACKET", "HEADER_SIZE", "IV_SIZE",
           "TAG_SIZE"]

HEADER_SIZE = 5
#: ReliSock::RcvMsg::rcv_packet's max_packet_size
MAX_PACKET = 1024 * 1024
#: Condor_Crypt_AESGCM's IV_SIZE and AES_MAC_SIZE
IV_SIZE = 16
TAG_SIZE = 16
# the handshake digests stop growing past this many bytes each way (rcv_packet/snd_packet's 1 MiB)
_DIGEST_LIMIT = 1024 * 1024
# packets this side writes: small enough to interleave, well under the peer's 1 MiB limit
_SEND_CHUNK = 256 * 1024


class CedarError(Exception):
    """The peer broke the protocol; the message is one line for the log (never a secret)."""


class PeerClosed(CedarError):
    """The peer closed the connection."""


class ReadTimeout(CedarError):
    """The peer did not send a whole message within the read timeout."""


class _Gcm:
    """One connection's AES-GCM state (``StreamCryptoState``): the key, the IV this side sends from
    (random, as ``initState`` makes it) and the one the peer sends from (learnt from its first packet),
    and the packets counted each way."""

    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("an AES-GCM session key is 32 bytes")
        # lazy: the crypto library is loaded by the first encrypted connection, not by every daemon at start
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(key)
        self._send_iv = os.urandom(IV_SIZE)
        self._send_count = 0
        self._recv_iv: bytes | None = None
        self._recv_count = 0

    @staticmethod
    def _iv(base: bytes, count: int) -> bytes:
        head = (int.from_bytes(base[:4], "big") + count) & 0xFFFFFFFF
        return head.to_bytes(4, "big") + base[4:]

    def sealed_size(self, plain: int) -> int:
        """``ciphertext_size_with_cs``: the body's length once sealed."""
        return plain + TAG_SIZE + (IV_SIZE if self._send_count == 0 else 0)

    def seal(self, plain: bytes, aad: bytes) -> bytes:
        if self._send_count >= 0xFFFFFFFF:
            raise CedarError("too many packets on one connection")
        out = self._aead.encrypt(self._iv(self._send_iv, self._send_count), plain, aad)
        first = self._send_count == 0
        self._send_count += 1
        return self._send_iv + out if first else out

    def open(self, body: bytes, aad: bytes) -> bytes:
        if self._recv_count >= 0xFFFFFFFF:
            raise CedarError("too many packets on one connection")
        first = self._recv_count == 0
        # the length came from the peer: it must hold the IV (first packet) and the tag before either is read
        if len(body) < TAG_SIZE + (IV_SIZE if first else 0):
            raise CedarError("an encrypted packet too short to hold its tag")
        if first:
            self._recv_iv, body = body[:IV_SIZE], body[IV_SIZE:]
        assert self._recv_iv is not None
        from cryptography.exceptions import InvalidTag  # lazy: loaded with AESGCM (__init__)

        try:
            plain = self._aead.decrypt(self._iv(self._recv_iv, self._recv_count), body, aad)
        except InvalidTag:
            raise CedarError("an encrypted packet failed its integrity check") from None
        self._recv_count += 1
        return plain


class Channel:
    """One ReliSock connection: whole messages in and out, in the clear until :meth:`start_encryption`.

    ``read_timeout`` bounds how long one message may take to arrive (a peer that stalls, or sends a
    byte at a time, is cut off); the same bound applies to a peer that does not read what is written.
    """

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, read_timeout: float) -> None:
        self._reader = reader
        self._writer = writer
        self.read_timeout = read_timeout
        self._gcm: _Gcm | None = None
        self._sent_md: "hashlib._Hash | None" = None
        self._recv_md: "hashlib._Hash | None" = None
        self._sent_bytes = 0
        self._recv_bytes = 0
        self._finals: tuple[bytes, bytes] | None = None
        self._first_sent = False
        self._first_received = False
        #: whole messages read so far (a connection that has read none is idle)
        self.messages_read = 0

    @property
    def encrypted(self) -> bool:
        """Whether a session key is set (strings then travel with their length; ``Stream::put``)."""
        return self._gcm is not None

    def start_encryption(self, key: bytes) -> None:
        """Seal every packet from now on with ``key`` (a fresh IV each way, as every new socket has)."""
        self._gcm = _Gcm(key)

    # -- the handshake digests ---------------------------------------------------------------------------

    def _digest_sent(self, data: bytes) -> None:
        if self._gcm is None and not self._first_sent and self._sent_bytes < _DIGEST_LIMIT:
            if self._sent_md is None:
                self._sent_md = hashlib.sha256()
            self._sent_md.update(data)
        self._sent_bytes += len(data)

    def _digest_received(self, data: bytes) -> None:
        if self._gcm is None and not self._first_received and self._recv_bytes < _DIGEST_LIMIT:
            if self._recv_md is None:
                self._recv_md = hashlib.sha256()
            self._recv_md.update(data)
        self._recv_bytes += len(data)

    def _final_digests(self) -> tuple[bytes, bytes]:
        """(what this side sent, what it received) before encryption, frozen at the first sealed packet
        either way; an empty direction digests to 32 zero bytes (m_final_mds)."""
        if self._finals is None:
            zero = bytes(32)
            self._finals = (self._sent_md.digest() if self._sent_md is not None else zero,
                            self._recv_md.digest() if self._recv_md is not None else zero)
            self._sent_md = self._recv_md = None
        return self._finals

    # -- reading -----------------------------------------------------------------------------------------

    async def _exactly(self, n: int, deadline: float) -> bytes:
        loop = asyncio.get_running_loop()
        left = deadline - loop.time()
        if left <= 0:
            raise ReadTimeout(f"no whole message within {self.read_timeout:g} s")
        try:
            return await asyncio.wait_for(self._reader.readexactly(n), left)
        except asyncio.IncompleteReadError as e:
            if e.partial:
                raise PeerClosed("the peer closed the connection in the middle of a message") from None
            raise PeerClosed("the peer closed the connection") from None
        except (asyncio.TimeoutError, TimeoutError):
            raise ReadTimeout(f"no whole message within {self.read_timeout:g} s") from None
        except (ConnectionError, OSError) as e:
            raise PeerClosed(f"the connection failed: {e.__class__.__name__}") from None

    async def read_message(self, limit: int) -> bytes:
        """The next whole message's plaintext. ``limit`` bounds the sum of its packets' bodies as they
        travel (checked before a body is read), so a message costs at most that much memory."""
        deadline = asyncio.get_running_loop().time() + self.read_timeout
        parts: list[bytes] = []
        total = 0
        while True:
            header = await self._exactly(HEADER_SIZE, deadline)
            end = header[0]
            (length,) = struct.unpack(">i", header[1:])
            if end > 10:  # rcv_packet: "Incoming packet header unrecognized"
                raise CedarError(f"an unrecognised packet header {header.hex(' ')}")
            if length > MAX_PACKET:
                raise CedarError(f"a packet of {length} bytes, over the 1 MiB limit")
            if length <= 0:
                raise CedarError(f"an improperly sized packet ({length} bytes)")
            if total + length > limit:
                raise CedarError(f"a message of more than {limit} bytes at this stage")
            body = await self._exactly(length, deadline)
            total += length
            if self._gcm is None:
                self._digest_received(header)
                self._digest_received(body)
                parts.append(body)
            else:
                if not self._first_received:
                    self._first_received = True
                    sent, received = self._final_digests()
                    aad = received + sent + header
                else:
                    aad = header
                parts.append(self._gcm.open(body, aad))
            if end:
                self.messages_read += 1
                return b"".join(parts)

    # -- writing -----------------------------------------------------------------------------------------

    def _packet(self, body: bytes, last: bool) -> bytes:
        flag = 1 if last else 0
        if self._gcm is None:
            header = struct.pack(">Bi", flag, len(body))
            self._digest_sent(header)
            self._digest_sent(body)
            return header + body
        header = struct.pack(">Bi", flag, self._gcm.sealed_size(len(body)))
        if not self._first_sent:
            self._first_sent = True
            sent, received = self._final_digests()
            aad = sent + received + header
        else:
            aad = header
        return header + self._gcm.seal(body, aad)

    async def write_message(self, data: bytes) -> None:
        """Send ``data`` as one message (in packets of at most 256 KiB). ``ReliSock`` sends nothing for
        an empty message, and neither does this."""
        if not data:
            return
        chunks = [data[i:i + _SEND_CHUNK] for i in range(0, len(data), _SEND_CHUNK)]
        for i, chunk in enumerate(chunks):
            self._writer.write(self._packet(chunk, i == len(chunks) - 1))
        try:
            await asyncio.wait_for(self._writer.drain(), self.read_timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise ReadTimeout(f"the peer did not read the reply within {self.read_timeout:g} s") from None
        except (ConnectionError, OSError) as e:
            raise PeerClosed(f"the connection failed: {e.__class__.__name__}") from None
