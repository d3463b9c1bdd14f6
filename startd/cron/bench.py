"""The benchmark jobs: ``python -m startd.cron.bench mips|kflops``.

Each measures this machine with a small kernel and prints one attribute in the cron output protocol,
as HTCondor's condor_mips and condor_kflops do: ``Mips`` (millions of integer operations a second,
from a loop of integer adds, multiplies, shifts and compares) and ``KFlops`` (thousands of
floating-point operations a second, from a daxpy-style multiply-add loop). The kernel runs in rounds
until about ``seconds`` have passed, and the best round counts, so a moment of contention on the
machine does not count against it.
"""

from __future__ import annotations

import sys
import time

# operations one pass of each kernel's inner loop performs
_INT_OPS_PER_STEP = 8
_FLOPS_PER_ELEMENT = 2


def _int_kernel(n: int) -> int:
    a, b, c = 1, 3, 7
    for i in range(n):
        a = (a + i) & 0xFFFF
        b = (b * 3) & 0xFFFF
        c ^= a >> 2
        if b > a:
            c += 1
    return a + b + c


def _float_kernel(x: list[float], y: list[float], alpha: float) -> float:
    for i in range(len(x)):
        y[i] = y[i] + alpha * x[i]
    return y[-1]


def measure_mips(seconds: float = 0.5) -> int:
    """Millions of integer operations a second, best of the rounds in ``seconds``."""
    n = 20000
    best = 0.0
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        _int_kernel(n)
        dt = time.perf_counter() - t0
        if dt > 0:
            best = max(best, n * _INT_OPS_PER_STEP / dt)
        if time.perf_counter() >= end:
            break
    return max(int(best / 1e6), 1)


def measure_kflops(seconds: float = 0.5) -> int:
    """Thousands of floating-point operations a second, best of the rounds in ``seconds``."""
    n = 20000
    x = [float(i % 97) * 0.5 for i in range(n)]
    y = [1.0] * n
    best = 0.0
    end = time.perf_counter() + seconds
    while True:
        t0 = time.perf_counter()
        _float_kernel(x, y, 1.0000001)
        dt = time.perf_counter() - t0
        if dt > 0:
            best = max(best, n * _FLOPS_PER_ELEMENT / dt)
        if time.perf_counter() >= end:
            break
    return max(int(best / 1e3), 1)


def main(argv: list[str] | None = None) -> int:
    """Print ``Mips = N`` or ``KFlops = N``; exit 2 on bad usage."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].lower() not in ("mips", "kflops"):
        print("usage: python -m startd.cron.bench mips|kflops [SECONDS]", file=sys.stderr)
        return 2
    seconds = float(args[1]) if len(args) > 1 else 0.5
    if args[0].lower() == "mips":
        print(f"Mips = {measure_mips(seconds)}")
    else:
        print(f"KFlops = {measure_kflops(seconds)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
