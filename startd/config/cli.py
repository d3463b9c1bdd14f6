"""``startd config-val [-c FILE] [-v] [--dump] NAME...``: print configuration values like condor_config_val."""

from __future__ import annotations

import argparse
import sys

from . import ConfigError, load


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the options of ``config-val``."""
    parser.add_argument("-c", "--config", metavar="FILE", help="configuration file (default: $CONDOR_CONFIG)")
    parser.add_argument("-v", "--verbose", action="store_true", help="also show the file:line that set each value")
    parser.add_argument("--dump", action="store_true", help="print every defined knob as NAME = value")
    parser.add_argument("names", nargs="*", metavar="NAME", help="knob names")


def run(args: argparse.Namespace) -> int:
    """Print the values; 1 when a name is not defined, 2 when the configuration cannot be read."""
    try:
        conf = load(args.config)
    except ConfigError as exc:
        print(f"startd config-val: ConfigError: {exc}", file=sys.stderr)
        return 2
    for w in conf.warnings:
        print(w, file=sys.stderr)
    if args.dump:
        try:
            for name in sorted(conf.defined_names(), key=str.upper):
                value = conf.get(name)
                print(f"{name} = {'' if value is None else value}")
                if args.verbose:
                    print(f"  # at: {conf.source(name)}")
        except ConfigError as exc:
            print(f"startd config-val: ConfigError: {exc}", file=sys.stderr)
            return 2
        return 0
    if not args.names:
        print("startd config-val: error: give at least one NAME, or --dump", file=sys.stderr)
        return 2
    status = 0
    for name in args.names:
        try:
            value = conf.get(name)
        except ConfigError as exc:
            print(f"startd config-val: ConfigError: {exc}", file=sys.stderr)
            return 2
        if value is None:
            print(f"Not defined: {name}", file=sys.stderr)
            status = 1
            continue
        if args.verbose:
            print(f"{name} = {value}")
            print(f"  # at: {conf.source(name)}")
        else:
            print(value)
    return status
