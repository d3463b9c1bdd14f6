"""HTCondor's own wire: the startd's side of CEDAR, so HTCondor's tools and the ``htcondor`` bindings
query and command this daemon (condor_status -direct, condor_drain, condor_reconfig, condor_off,
condor_vacate).

* :mod:`.framing` - ReliSock packets and messages, the handshake digests, AES-GCM.
* :mod:`.codec` - integers, doubles and strings inside a message (condor_io/stream.cpp).
* :mod:`.classad_wire` - ClassAds on the stream, private attributes left out.
* :mod:`.ecdh` - the session key: ECDH on P-256 and HKDF.
* :mod:`.idtokens` - IDTOKENS authentication, server side, with the pool key MQTT uses.
* :mod:`.policy` - SEC_<LEVEL>_* requirements and their negotiation; the server's policy decides.
* :mod:`.sessions` - resumable security sessions.
* :mod:`.commands` - the command table: numbers, levels, payloads, replies.
* :mod:`.query` - QUERY_STARTD_ADS and QUERY_MULTIPLE_ADS.
* :mod:`.protocol` - one connection through DaemonCommandProtocol.
* :mod:`.server` - the asyncio listener, its read timeout and connection cap.

The daemon supplies a :class:`~.protocol.Backend`: its ads, and its command handling, which is the one
MQTT commands go through.
"""

from __future__ import annotations

from .commands import COMMANDS, CedarCommand, Outcome
from .framing import CedarError
from .idtokens import TokenAuthority
from .policy import ServerPolicy
from .protocol import Backend, CedarSecurity, Peer
from .query import AdQuery
from .server import DEFAULT_MAX_CONNECTIONS, DEFAULT_READ_TIMEOUT, CedarServer, sinful
from .sessions import SessionCache

__all__ = ["COMMANDS", "CedarCommand", "Outcome", "CedarError", "TokenAuthority", "ServerPolicy", "Backend",
           "CedarSecurity", "Peer", "AdQuery", "CedarServer", "sinful", "SessionCache", "DEFAULT_MAX_CONNECTIONS",
           "DEFAULT_READ_TIMEOUT"]
