"""``startd eval EXPR [--my ADFILE] [--target ADFILE]``: print an expression's value in ClassAd syntax."""

from __future__ import annotations

import argparse
import sys

from ..classad.ad import ClassAd, parse_ad, parse_expr
from ..classad.jsonform import from_json
from ..classad.parser import ClassAdSyntaxError
from ..classad.unparse import format_value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("expr", metavar="EXPR", help="the expression to evaluate")
    parser.add_argument("--my", metavar="ADFILE", help="the ad that MY (and unscoped names) refer to")
    parser.add_argument("--target", metavar="ADFILE", help="the ad that TARGET refers to")
    parser.add_argument("--qube", action="store_true", help="read EXPR as a Qube! requirement expression")


def read_ad_file(path: str) -> ClassAd:
    """Read an ad from a file (new syntax, old syntax or JSON); ``-`` is standard input.

    Raises ValueError with a message naming the file and line.
    """
    try:
        if path == "-":
            text = sys.stdin.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise ValueError(f"{path}: not valid UTF-8 at byte {e.start}") from None
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    try:
        if text.lstrip().startswith("{"):
            return from_json(text)
        return parse_ad(text, source=path)
    except ClassAdSyntaxError as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith(path) else f"{path}: {msg}") from None


def run(args: argparse.Namespace) -> int:
    try:
        my = read_ad_file(args.my) if args.my else None
        target = read_ad_file(args.target) if args.target else None
    except ValueError as e:
        print(f"startd eval: {e}", file=sys.stderr)
        return 2
    try:
        if args.qube:
            from ..qube import parse as qube_parse

            expr = qube_parse(args.expr)
        else:
            expr = parse_expr(args.expr)
    except ClassAdSyntaxError as e:
        print(f"startd eval: EXPR: {e}", file=sys.stderr)
        return 2
    value = expr.evaluate(my if my is not None else ClassAd(), target)
    print(format_value(value))
    return 0
