"""The pool signing key, stored as HTCondor stores it, so tokens cross between this daemon and HTCondor.

HTCondor keeps the POOL token signing key in ``SEC_TOKEN_POOL_SIGNING_KEY_FILE`` (by default
``$(SEC_PASSWORD_DIRECTORY)/POOL``, i.e. ``$(ETC)/passwords.d/POOL``):

* ``Condor_Auth_Passwd::create_signing_key`` (condor_io/condor_auth_passwd.cpp) creates it when missing:
  64 random bytes, written by ``write_binary_password_file`` (condor_utils/secure_file.cpp), which XORs
  them with ``DE AD BE EF`` repeated (``simple_scramble``) into a file of mode 0600.
* ``getTokenSigningKey`` (condor_utils/store_cred.cpp) reads it with ``read_secure_file`` (owner and
  mode checked), undoes the scramble and, for the POOL key, doubles it (the contents twice over).
* ``Condor_Auth_Passwd::generate_token`` derives the HS256 key from that:
  ``HKDF-SHA256(key, salt="htcondor", info="master jwt", 32 bytes)``.

Where the file is: a configuration that names it (``SEC_TOKEN_POOL_SIGNING_KEY_FILE``, or one of the knobs
its default is made of, ``SEC_PASSWORD_FILE``, ``SEC_PASSWORD_DIRECTORY``, ``ETC``, set in a file or the
environment) gets that file and no other: HTCondor's ``getTokenSigningKeyPath`` (condor_utils/store_cred.cpp)
has no fallback, and a token signed by a key found elsewhere would be refused by every daemon of the pool.
Only where nothing is configured (the defaults, whose ``$(ETC)`` is empty, yield a path such as
``/passwords.d/POOL`` in a top-level directory nobody made for it) are there fallbacks, and
:func:`key_origin` says which was taken: ``~/.startd/passwords.d/POOL`` (the home of this user), then
``/tmp/startd-<uid>/passwords.d/POOL``. The daemon creates the key in the first of these it can; a client
of the same user with the same configuration reads the first one it can, so both find the same file.

Nothing here writes a key, or anything derived from one, into a message, a log line or a repr.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import os
import pwd
import secrets
import stat
from pathlib import Path
from typing import Protocol

__all__ = ["SigningKeyError", "KnobSource", "signing_key_candidates", "signing_key_path", "ensure_signing_key",
           "load_signing_key", "read_signing_key", "find_signing_key", "scramble", "derive_jwt_key", "hkdf_sha256",
           "user_home", "configured_path_usable", "configured_key_file", "key_origin", "KEY_FILE_BYTES"]

#: Bytes of randomness in a new key file (create_signing_key's rand_buffer).
KEY_FILE_BYTES = 64

# simple_scramble's pad (condor_utils/secure_file.cpp)
_PAD = bytes((0xDE, 0xAD, 0xBE, 0xEF))

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class SigningKeyError(Exception):
    """A signing key that cannot be used. The message is one line naming the file and what is wrong."""


class _UnreadableKey(SigningKeyError):
    """No candidate key could be read (none exists, or this user may not read it): not an insecure file."""


class KnobSource(Protocol):
    """Anything with ``get(name) -> str | None``: a :class:`startd.config.Config` or a plain dict."""

    def get(self, name: str, /) -> str | None: ...


def scramble(data: bytes) -> bytes:
    """HTCondor's ``simple_scramble``: XOR with DE AD BE EF repeated. Its own inverse."""
    return bytes(b ^ _PAD[i % 4] for i, b in enumerate(data))


def hkdf_sha256(key: bytes, *, salt: bytes, info: bytes, length: int = 32) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt`` (none: 32 zero bytes), expand with ``info``. The
    standard library's HMAC is all it takes, so a daemon that only checks tokens never loads a crypto
    library."""
    if not 0 < length <= 255 * 32:
        raise ValueError("HKDF-SHA256 yields 1 to 8160 bytes")
    prk = hmac.new(salt or bytes(32), key, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(prk, block + info + bytes((counter,)), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def derive_jwt_key(shared_key: bytes) -> bytes:
    """The HS256 key ``generate_token`` signs with: HKDF-SHA256(shared_key, "htcondor", "master jwt", 32)."""
    return hkdf_sha256(shared_key, salt=b"htcondor", info=b"master jwt")


# ------------------------------------------------------------------------------------------------
# where the file is


def user_home() -> Path | None:
    """This account's home directory (absolute), or None."""
    # the account's home from the password database, so a daemon and a client of the same user agree
    # whatever their environments say; $HOME only when the account has no entry
    try:
        home = pwd.getpwuid(os.geteuid()).pw_dir
    except KeyError:
        home = os.environ.get("HOME", "")
    return Path(home) if home and os.path.isabs(home) else None


def configured_path_usable(path: Path) -> bool:
    """False for a relative path, or one whose directory would be a new top-level directory (what an
    empty ``$(ETC)`` yields: ``/passwords.d/POOL``)."""
    if not path.is_absolute():
        return False
    parent = path.parent
    if parent == Path(parent.anchor):
        return False  # a key file directly in /
    if parent.parent == Path(parent.anchor) and not parent.exists():
        return False
    return True


#: The knobs whose setting names the POOL key file: SEC_TOKEN_POOL_SIGNING_KEY_FILE and what its default,
#: ``$(SEC_PASSWORD_FILE)`` = ``$(SEC_PASSWORD_DIRECTORY)/POOL`` = ``$(ETC)/passwords.d/POOL``, is made of.
KEY_FILE_KNOBS = ("SEC_TOKEN_POOL_SIGNING_KEY_FILE", "SEC_PASSWORD_FILE", "SEC_PASSWORD_DIRECTORY", "ETC")


def _set_by_configuration(conf: KnobSource, name: str) -> bool:
    """Whether ``name`` was set by a configuration file or the environment, not by the defaults table. A
    plain mapping (no ``source``) holds only what was set."""
    source = getattr(conf, "source", None)
    if source is None:
        return conf.get(name) is not None
    where = source(name)
    return where is not None and where not in ("<Default>", "<default>", "<Detected>")


def configured_key_file(conf: KnobSource) -> Path | None:
    """The POOL key file the configuration names, or None when every knob that leads to it is at its
    default (then the fallbacks of :func:`signing_key_candidates` apply)."""
    path = conf.get("SEC_TOKEN_POOL_SIGNING_KEY_FILE")
    if not path or not any(_set_by_configuration(conf, k) for k in KEY_FILE_KNOBS):
        return None
    return Path(path)


def signing_key_candidates(conf: KnobSource) -> list[Path]:
    """The places the POOL key may be, in the order both daemon and clients try them. A configured key file
    (:func:`configured_key_file`) is the only one: getTokenSigningKeyPath has no fallback. Otherwise the
    default ``SEC_TOKEN_POOL_SIGNING_KEY_FILE`` when usable, ``~/.startd/passwords.d/POOL``,
    ``/tmp/startd-<uid>/passwords.d/POOL``."""
    configured = configured_key_file(conf)
    if configured is not None:
        return [configured]
    out: list[Path] = []
    default = conf.get("SEC_TOKEN_POOL_SIGNING_KEY_FILE")
    if default and configured_path_usable(Path(default)):
        out.append(Path(default))
    home = user_home()
    if home is not None and home.is_dir():
        out.append(home / ".startd" / "passwords.d" / "POOL")
    out.append(Path(f"/tmp/startd-{os.geteuid()}") / "passwords.d" / "POOL")
    # one configuration may name a fallback itself; try each place once
    unique: list[Path] = []
    for p in out:
        if p not in unique:
            unique.append(p)
    return unique


def key_origin(conf: KnobSource, path: Path) -> str:
    """How ``path`` was chosen, for a log line or a tool's message: the knob that names it, or that it is
    a fallback because no key file is configured."""
    if configured_key_file(conf) is not None:
        return "SEC_TOKEN_POOL_SIGNING_KEY_FILE"
    if path == Path(conf.get("SEC_TOKEN_POOL_SIGNING_KEY_FILE") or "/"):
        return "the default SEC_TOKEN_POOL_SIGNING_KEY_FILE"
    return "a fallback: SEC_TOKEN_POOL_SIGNING_KEY_FILE is not configured"


def _creatable(path: Path) -> bool:
    """Whether this user could create ``path``: its nearest existing ancestor is a writable directory."""
    d = path.parent
    while not d.exists():
        if d == d.parent:
            return False
        d = d.parent
    return d.is_dir() and os.access(d, os.W_OK | os.X_OK)


def signing_key_path(conf: KnobSource, *, create: bool = False) -> Path:
    """The POOL key file for this configuration: the first candidate that exists; else (``create``) the
    first whose directory this user can create or write, else the first candidate."""
    candidates = signing_key_candidates(conf)
    for p in candidates:
        if os.path.lexists(p):
            return p
    if create:
        for p in candidates:
            if _creatable(p):
                return p
    return candidates[0]


# ------------------------------------------------------------------------------------------------
# checks


def _reason(exc: OSError) -> str:
    return exc.strerror or str(exc.errno)


def _check_parent(up: Path, path: Path) -> None:
    """The directory above the key's: owned by this user or root, and writable by others only when
    sticky (like /tmp). Another user who owns or may write it could swap the key's directory."""
    euid = os.geteuid()
    try:
        pst = os.stat(up)
    except OSError:
        return
    if pst.st_uid not in (euid, 0):
        raise SigningKeyError(f"the directory {up} holding the signing key {path} is owned by uid "
                              f"{pst.st_uid}, not by this user (uid {euid}) or root")
    if pst.st_mode & 0o022 and not pst.st_mode & stat.S_ISVTX:
        raise SigningKeyError(f"the directory {up} holding the signing key {path} is writable by others "
                              f"(mode {stat.S_IMODE(pst.st_mode):04o})")


def _check_directory(path: Path) -> None:
    """The key's directory must be owned by this user or root and writable by no one else; its parent
    is checked by :func:`_check_parent` (guards against another user making /tmp/startd-<uid> first)."""
    euid = os.geteuid()
    d = path.parent
    try:
        st = os.stat(d)
    except OSError as exc:
        raise SigningKeyError(f"cannot read the signing key {path}: {_reason(exc)}") from None
    if st.st_uid not in (euid, 0):
        raise SigningKeyError(f"the directory of the signing key {path} is owned by uid {st.st_uid}, "
                              f"not by this user (uid {euid}) or root")
    if st.st_mode & 0o022:
        raise SigningKeyError(f"the directory of the signing key {path} is writable by others "
                              f"(mode {stat.S_IMODE(st.st_mode):04o})")
    if d.parent != d:
        _check_parent(d.parent, path)


def _check_file(path: Path, st: os.stat_result) -> None:
    # read_secure_file's checks (condor_utils/secure_file.cpp): owned by us, no access for others
    euid = os.geteuid()
    if not stat.S_ISREG(st.st_mode):
        raise SigningKeyError(f"the signing key {path} is not a regular file")
    if st.st_uid not in (euid, 0):
        raise SigningKeyError(f"the signing key {path} is owned by uid {st.st_uid}, not by this user "
                              f"(uid {euid}) or root")
    if st.st_mode & 0o077:
        raise SigningKeyError(f"the signing key {path} is readable or writable by others "
                              f"(mode {stat.S_IMODE(st.st_mode):04o}); it must be 0600")


def _read_raw(path: Path) -> bytes:
    """The file's bytes after the secure checks. OSError (ENOENT, EACCES...) passes through unchanged so
    callers can tell "not there / not mine to read" from "insecure"."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.EMLINK and os.path.islink(path)):
            raise SigningKeyError(f"the signing key {path} is a symbolic link") from None
        raise
    try:
        st = os.fstat(fd)
        _check_file(path, st)
        _check_directory(path)
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        # read_secure_file refuses a file that changed while it was read
        if os.fstat(fd).st_mtime_ns != st.st_mtime_ns:
            raise SigningKeyError(f"the signing key {path} changed while it was read")
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if not data:
        raise SigningKeyError(f"the signing key {path} is empty")
    return data


# ------------------------------------------------------------------------------------------------
# reading


def load_signing_key(path: Path | str, *, pool: bool = True) -> bytes:
    """The 32-byte HS256 key of the key file ``path`` (unscrambled, doubled for the POOL key as
    getTokenSigningKey does, then HKDF as generate_token does). Raises :class:`SigningKeyError`."""
    p = Path(path)
    try:
        raw = _read_raw(p)
    except OSError as exc:
        raise SigningKeyError(f"cannot read the signing key {p}: {_reason(exc)}") from None
    return _jwt_key(raw, pool)


def _jwt_key(raw: bytes, pool: bool) -> bytes:
    shared = scramble(raw)
    if pool:
        # getTokenSigningKey: "we will always double the pool key" (pre-9.0 pool passwords were doubled)
        shared = shared + shared
    return derive_jwt_key(shared)


def read_signing_key(conf: KnobSource) -> tuple[Path, bytes]:
    """The first candidate key this process can read, as (path, HS256 key). Raises
    :class:`SigningKeyError`: for an insecure file it could read, else naming the first candidate that
    exists but cannot be read (or the first candidate, when none exists)."""
    first_problem: str | None = None
    candidates = signing_key_candidates(conf)
    for p in candidates:
        try:
            raw = _read_raw(p)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            if first_problem is None:
                first_problem = f"cannot read the signing key {p}: {_reason(exc)}"
            continue
        return p, _jwt_key(raw, True)
    raise _UnreadableKey(first_problem or f"cannot read the signing key {candidates[0]}: No such file or directory")


def find_signing_key(conf: KnobSource) -> tuple[Path, bytes] | None:
    """Client side: (path, HS256 key) of the first candidate this process can read; None when none is
    readable or none exists. Raises :class:`SigningKeyError` only for an insecure file it could read."""
    try:
        return read_signing_key(conf)
    except _UnreadableKey:
        return None


# ------------------------------------------------------------------------------------------------
# creating (daemon side)


def _make_directory(d: Path) -> None:
    """Create ``d`` and missing parents 0700 (umask may not widen or narrow what we mean)."""
    missing: list[Path] = []
    cur = d
    while not os.path.lexists(cur):
        missing.append(cur)
        if cur == cur.parent:
            break
        cur = cur.parent
    for m in reversed(missing):
        try:
            os.mkdir(m, 0o700)
        except FileExistsError:
            continue
        os.chmod(m, 0o700)


def _create(path: Path) -> None:
    """create_signing_key: O_CREAT|O_EXCL (never over an existing file or symlink), mode 0600, 64 random
    bytes scrambled as write_binary_password_file writes them."""
    if path.parent.parent != path.parent:
        _check_parent(path.parent.parent, path)  # before making anything inside a squatted directory
    _make_directory(path.parent)
    _check_directory(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        data = scramble(secrets.token_bytes(KEY_FILE_BYTES))
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    os.close(fd)


# errors that mean "not here, try the next place" while creating
_SKIP_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.ENOENT, errno.ENOSPC, errno.EDQUOT}


def ensure_signing_key(conf: KnobSource) -> Path:
    """Daemon side: the path of a usable POOL key, created in the first place that allows it when none
    exists. An existing key is checked (regular file, owned by this user or root, mode 0600, directory
    not writable by others); a violation raises :class:`SigningKeyError` rather than moving on."""
    tried: list[str] = []
    for p in signing_key_candidates(conf):
        for _ in range(2):  # a second look when another process created the file meanwhile
            try:
                _read_raw(p)
                return p
            except (FileNotFoundError, NotADirectoryError):
                pass
            except OSError as exc:
                tried.append(f"{p} ({_reason(exc)})")
                break
            try:
                _create(p)
                return p
            except FileExistsError:
                continue
            except OSError as exc:
                if exc.errno in _SKIP_ERRNOS:
                    tried.append(f"{p} ({_reason(exc)})")
                    break
                raise SigningKeyError(f"cannot create the signing key {p}: {_reason(exc)}") from None
    raise SigningKeyError("cannot create a signing key: tried " + ", ".join(tried))
