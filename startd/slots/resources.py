"""A bundle of machine resources: what a slot holds, what a job requests, what a partitionable slot has left."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Mapping

# The standard resources, in the order HTCondor reports them.
STANDARD = ("cpus", "memory", "disk", "swap")


def _clean(value: float) -> float | int:
    """Integral floats become ints, so amounts print as HTCondor prints them (``4``, not ``4.0``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


@dataclass(frozen=True)
class Resources:
    """Amounts of each resource: ``cpus`` (a count, fractional only for fractional shares), ``memory``
    in MB, ``disk`` and ``swap`` in KB, and ``custom`` counts keyed by the resource's configured name
    (``GPUs``, ``Bogus``...). Lookups of custom names are case-insensitive, as ClassAd names are."""

    cpus: float = 0
    memory: float = 0
    disk: float = 0
    swap: float = 0
    custom: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpus", _clean(self.cpus))
        object.__setattr__(self, "memory", _clean(self.memory))
        object.__setattr__(self, "disk", _clean(self.disk))
        object.__setattr__(self, "swap", _clean(self.swap))
        object.__setattr__(self, "custom", {k: _clean(v) for k, v in self.custom.items()})

    # -- access ---------------------------------------------------------------------------------

    def get(self, name: str) -> float:
        """The amount of ``name``: a standard resource (``cpus``...) or a custom one; 0 when absent."""
        low = name.lower()
        if low in STANDARD:
            return float(getattr(self, low))
        for k, v in self.custom.items():
            if k.lower() == low:
                return float(v)
        return 0.0

    def names(self) -> Iterator[str]:
        """The standard names, then the custom ones."""
        yield from STANDARD
        yield from self.custom

    def replace(self, **amounts: float) -> "Resources":
        """A copy with some amounts changed; keys may be standard or custom names."""
        std = {n: getattr(self, n) for n in STANDARD}
        custom = dict(self.custom)
        for k, v in amounts.items():
            if k.lower() in STANDARD:
                std[k.lower()] = v
            else:
                key = next((c for c in custom if c.lower() == k.lower()), k)
                custom[key] = v
        return Resources(custom=custom, **std)

    # -- arithmetic -----------------------------------------------------------------------------

    def _combine(self, other: "Resources", sign: int) -> "Resources":
        custom = dict(self.custom)
        for k, v in other.custom.items():
            key = next((c for c in custom if c.lower() == k.lower()), k)
            custom[key] = custom.get(key, 0) + sign * v
        return Resources(
            cpus=self.cpus + sign * other.cpus,
            memory=self.memory + sign * other.memory,
            disk=self.disk + sign * other.disk,
            swap=self.swap + sign * other.swap,
            custom=custom,
        )

    def __add__(self, other: "Resources") -> "Resources":
        return self._combine(other, 1)

    def __sub__(self, other: "Resources") -> "Resources":
        return self._combine(other, -1)

    def fits_in(self, other: "Resources") -> bool:
        """Every amount here is at most the same amount in ``other`` (the standard four and each custom)."""
        return self.shortfall(other) is None

    def __le__(self, other: "Resources") -> bool:
        return self.fits_in(other)

    def shortfall(self, other: "Resources", *, include_swap: bool = True) -> str | None:
        """The first resource whose amount here exceeds ``other``'s, or None when all fit."""
        for n in STANDARD:
            if n == "swap" and not include_swap:
                continue
            if float(getattr(self, n)) > float(getattr(other, n)) + 1e-9:
                return n
        for k, v in self.custom.items():
            if float(v) > other.get(k) + 1e-9:
                return k
        return None

    def is_empty(self) -> bool:
        """No cpus, memory, disk or custom resource (swap is not handed out, so it does not count)."""
        return (float(self.cpus) <= 0 and float(self.memory) <= 0 and float(self.disk) <= 0
                and all(float(v) <= 0 for v in self.custom.values()))

    def as_dict(self) -> dict[str, float]:
        """``{"cpus": .., "memory": .., "disk": .., "swap": .., <custom>: ..}``."""
        out: dict[str, float] = {n: getattr(self, n) for n in STANDARD}
        out.update(self.custom)
        return out
