"""``startd token create`` and ``startd token list``: condor_token_create and condor_token_list.

``create`` (src/condor_tools/token_create.cpp) signs a token with the pool signing key, which only a
user who can read the key file may do; the issuer is TRUST_DOMAIN. The token goes to stdout, or to
``-file NAME``, or to ``-token NAME`` in this user's token directory (write_out_token in
condor_utils/token_utils.cpp), always mode 0600.

``list`` (src/condor_tools/token_list.cpp) prints, for each token a client would find, its header and
payload (``Header: {...} Payload: {...} File: PATH``), never its signature.

Both accept HTCondor's single-dash spellings (``-identity``) as well as ``--identity``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..config import ConfigError
from ..security.authz import PERMISSION_NAMES
from ..security.keys import SigningKeyError, key_origin, load_signing_key, read_signing_key
from ..security.tokens import TokenError, decode_segments, mint, read_token_file, token_directory, token_files
from . import load_tool_config

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register ``token create`` and ``token list``."""
    sub = parser.add_subparsers(dest="token_command", metavar="SUBCOMMAND")
    c = sub.add_parser("create", help="sign a token with the pool signing key (condor_token_create)",
                       description="Sign an IDTOKEN with the pool signing key, as condor_token_create does.")
    c.add_argument("-identity", "--identity", metavar="USER@DOMAIN", help="the identity the token proves")
    c.add_argument("-authz", "--authz", action="append", default=[], metavar="LEVEL",
                   help="limit the token to this authorization level (repeatable)")
    c.add_argument("-lifetime", "--lifetime", type=int, metavar="SECONDS", help="the token expires after this")
    c.add_argument("-key", "--key", default="POOL", metavar="KEYID", help="signing key name (default POOL)")
    out = c.add_mutually_exclusive_group()
    out.add_argument("-token", "--token", metavar="NAME", help="write the token to NAME in the token directory")
    out.add_argument("-file", "--file", metavar="NAME", help="write the token to this file")
    c.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    ls = sub.add_parser("list", help="show the tokens this user's clients would use (condor_token_list)",
                        description="Show header and payload of each token found, as condor_token_list does.")
    where = ls.add_mutually_exclusive_group()
    where.add_argument("-dir", "--dir", metavar="PATH", help="look in this directory instead")
    where.add_argument("-file", "--file", metavar="FILE", help="show the tokens of this one file")
    ls.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")


def run(args: argparse.Namespace) -> int:
    """Run ``token create`` or ``token list``; 2 for bad usage or input."""
    which = getattr(args, "token_command", None)
    if which == "create":
        return _create(args)
    if which == "list":
        return _list(args)
    print("startd token: error: give a subcommand: create or list", file=sys.stderr)
    return 2


def _fail(prog: str, message: str, code: int = 2) -> int:
    print(f"{prog}: {message}", file=sys.stderr)
    return code


def _write_token(path: Path, token: str) -> None:
    """Write ``token`` and a newline to ``path``, mode 0600, never through a symbolic link."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        data = (token + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def _make_private_directory(d: Path) -> None:
    """mkdir_and_parents_if_needed(dirpath, 0700)."""
    missing = []
    cur = d
    while not cur.exists():
        missing.append(cur)
        if cur == cur.parent:
            break
        cur = cur.parent
    for m in reversed(missing):
        os.mkdir(m, 0o700)
        os.chmod(m, 0o700)


def _create(args: argparse.Namespace) -> int:
    prog = "startd token create"
    if not args.identity:
        return _fail(prog, "-identity USER@DOMAIN is required")
    for name in args.authz:
        if name.upper() not in PERMISSION_NAMES:
            known = ", ".join(sorted(PERMISSION_NAMES))
            return _fail(prog, f"-authz {name}: not an authorization level ({known})")
    try:
        conf = load_tool_config(args.config)
    except ConfigError as exc:
        return _fail(prog, f"ConfigError: {exc}")
    issuer = conf.get("TRUST_DOMAIN")
    if not issuer:
        return _fail(prog, "TRUST_DOMAIN is not set (generate_token: Issuer namespace is not set)")
    try:
        if args.key == "POOL":
            key_path, key = read_signing_key(conf)
            origin = key_origin(conf, key_path)
            if origin.startswith("a fallback"):
                print(f"{prog}: signing with {key_path} ({origin})", file=sys.stderr)
        else:
            # getTokenSigningKeyPath: other keys are files of that name in SEC_PASSWORD_DIRECTORY
            directory = conf.get("SEC_PASSWORD_DIRECTORY")
            if not directory:
                return _fail(prog, "SEC_PASSWORD_DIRECTORY is undefined")
            if os.path.basename(args.key) != args.key or args.key in (".", ".."):
                return _fail(prog, f"-key {args.key}: not a plain key name")
            key = load_signing_key(Path(directory) / args.key, pool=False)
    except SigningKeyError as exc:
        return _fail(prog, str(exc))
    try:
        token = mint(key, identity=args.identity, issuer=issuer, authz=args.authz, lifetime=args.lifetime,
                     key_id=args.key)
    except TokenError as exc:
        return _fail(prog, str(exc))
    if args.file:
        target = Path(args.file)
    elif args.token:
        # write_out_token: "Token name isn't a plain filename"
        if os.path.basename(args.token) != args.token or args.token in (".", ".."):
            return _fail(prog, f"-token {args.token}: not a plain file name")
        directory_path = token_directory(conf)
        if directory_path is None:
            return _fail(prog, "no token directory: set SEC_TOKEN_DIRECTORY")
        try:
            _make_private_directory(directory_path)
        except OSError as exc:
            return _fail(prog, f"cannot create the token directory {directory_path}: {exc.strerror}", 1)
        target = directory_path / args.token
    else:
        print(token)
        return 0
    try:
        _write_token(target, token)
    except OSError as exc:
        return _fail(prog, f"cannot write the token to {target}: {exc.strerror}", 1)
    return 0


def _list(args: argparse.Namespace) -> int:
    prog = "startd token list"
    try:
        conf = load_tool_config(args.config)
    except ConfigError as exc:
        return _fail(prog, f"ConfigError: {exc}")
    files = [Path(args.file)] if args.file else token_files(conf, args.dir)
    for path in files:
        # printToken reads any file it can open; the secure-file rule is the client's, not the lister's
        for token in read_token_file(path, secure=False):
            try:
                header, payload = decode_segments(token)
            except TokenError:
                continue
            print(f"Header: {header} Payload: {payload} File: {path}")
    return 0
