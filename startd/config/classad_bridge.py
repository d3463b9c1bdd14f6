"""The few places where the configuration language evaluates ClassAd expressions.

``$INT``/``$REAL`` accept expressions (``$INT(5*60)``), ``$EVAL`` and ``$STRING`` evaluate, and typed
knobs are read as expressions the way HTCondor's ``param_integer`` reads them. The ClassAd package is
imported only when one of these is used.
"""

from __future__ import annotations

import math
from typing import Any, Literal, overload

from .errors import ConfigError


def _classad() -> Any:
    try:
        import startd.classad as classad
    except ImportError as exc:  # the language package is part of the project; say so plainly
        raise ConfigError(f"evaluating an expression needs startd.classad, which failed to import: {exc}") from exc
    return classad


def evaluate(text: str) -> Any:
    """Parse and evaluate ``text`` in an empty ad; None when it does not parse."""
    ca = _classad()
    try:
        expr = ca.parse_expr(text)
    except ca.ClassAdSyntaxError:
        return None
    except ValueError:
        return None
    try:
        return expr.evaluate(ca.ClassAd())
    except TypeError:
        return expr.evaluate()


def evaluate_literal(text: str) -> Any:
    """The value of ``text`` as a number/boolean/string, or None when it has none."""
    value = evaluate(text)
    if value is None:
        return None
    ca = _classad()
    if value is ca.UNDEFINED or value is ca.ERROR:
        return None
    return value


def evaluate_string(text: str) -> str | None:
    """The string ``text`` evaluates to, or None when it is not a string expression."""
    value = evaluate(text)
    return value if isinstance(value, str) else None


def render_value(value: Any) -> str:
    """A value in ClassAd literal syntax (``true``, ``3``, ``2.5``, ``undefined``, ``"s"``)."""
    ca = _classad()
    for helper in ("unparse_value", "format_value", "literal_text"):
        fn = getattr(ca, helper, None)
        if fn is not None:
            return str(fn(value))
    if value is ca.UNDEFINED:
        return "undefined"
    if value is ca.ERROR:
        return "error"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, float):
        text = repr(value)
        return text if ("." in text or "e" in text or "n" in text) else text + ".0"
    return str(value)


def evaluate_to_text(text: str) -> str:
    """``$EVAL``: a string result as itself, anything else in literal syntax, "" when unparsable."""
    value = evaluate(text)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return render_value(value)


def bool_value(text: str) -> bool | None:
    """Read a boolean knob as HTCondor's param_boolean does: true/false/yes/no/t/f, numbers, expressions."""
    s = text.strip()
    low = s.lower()
    if low in ("true", "yes", "t", "y"):
        return True
    if low in ("false", "no", "f", "n"):
        return False
    try:
        return float(s) != 0
    except ValueError:
        pass
    value = evaluate_literal(s)
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return None


@overload
def number_value(text: str, want_int: Literal[True]) -> int | None: ...
@overload
def number_value(text: str, want_int: bool) -> int | float | None: ...


def number_value(text: str, want_int: bool) -> int | float | None:
    """Read a number as HTCondor's string_is_long_param / string_is_double_param do: numeric knobs
    (param_integer / param_double) and the ``$INT``/``$REAL``/``$SUBSTR``/``$CHOICE`` macros."""
    s = text.strip()
    try:
        return int(s, 10)
    except ValueError:
        pass
    if not want_int:
        try:
            return float(s)
        except ValueError:
            pass
    value = evaluate_literal(s)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if want_int:
            if math.isnan(value) or math.isinf(value):
                return None
            return int(value)
        return value
    return None
