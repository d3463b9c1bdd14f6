"""The engine's outputs as the JSON event objects both shells print.

``startd simulate --json`` prints them one a line and ``startd run`` publishes them on
``{root}/startd/{M}/events`` (CONTRACTS sections 3 and 4), so a consumer reads a simulated timeline and
a live machine the same way. ``t`` is the caller's clock: seconds since the scenario started in the
simulator, seconds since the epoch in the daemon.

A claim id never appears in an event: events are public and a claim id is a capability.
"""

from __future__ import annotations

from typing import Any

from .engine import events as ev
from .engine.explain import Explanation


def explain_object(explain: Explanation | None) -> dict[str, Any] | None:
    """The ``explain`` object of a transition or reply event: ``{"expr", "value", "kind", "clauses":
    [{"text", "value", "attrs"}]}`` (see :mod:`startd.engine.explain`); None when the engine gave none."""
    return None if explain is None else explain.to_json()


def transition_event(t: int | float, out: ev.Transition, explain: bool = True) -> dict[str, Any]:
    """``{"event": "transition", "slot", "from": "State/Activity", "to", "transition": N, "reason"}``, and
    ``"explain"`` when asked for and the engine gave one."""
    event = {"t": t, "event": "transition", "slot": out.slot,
             "from": f"{out.from_state}/{out.from_activity}",
             "to": f"{out.to_state}/{out.to_activity}", "transition": out.number,
             "reason": out.reason}
    if explain and out.explain is not None:
        event["explain"] = out.explain.to_json()
    return event


def slot_created_event(t: int | float, out: ev.SlotCreated) -> dict[str, Any]:
    """``{"event": "slot_created", "slot", "state", "activity", "parent"}``."""
    return {"t": t, "event": "slot_created", "slot": out.slot, "state": str(out.state),
            "activity": str(out.activity), "parent": out.parent}


def slot_deleted_event(t: int | float, out: ev.SlotDeleted) -> dict[str, Any]:
    """``{"event": "slot_deleted", "slot"}``."""
    return {"t": t, "event": "slot_deleted", "slot": out.slot}


def job_event(t: int | float, slot: str, what: str, **details: Any) -> dict[str, Any]:
    """``{"event": "job", "slot", "what"}``: start, suspend, continue, soft_kill, hard_kill or exit.

    ``details`` are added as given (the daemon's exit event carries ``exit_code`` and, for a job ended
    by a signal, ``signal``); None values are kept, so ``"exit_code": null`` says "no exit code"."""
    event: dict[str, Any] = {"t": t, "event": "job", "slot": slot, "what": what}
    event.update(details)
    return event


def output_event(t: int | float, out: ev.Output, explain: bool = True) -> dict[str, Any] | None:
    """The event of a Transition, SlotCreated or SlotDeleted output; None for any other output (the
    shells report job events from what they do to the job, and replies in their own way). ``explain``
    False leaves a transition's ``explain`` object out."""
    if isinstance(out, ev.Transition):
        return transition_event(t, out, explain)
    if isinstance(out, ev.SlotCreated):
        return slot_created_event(t, out)
    if isinstance(out, ev.SlotDeleted):
        return slot_deleted_event(t, out)
    return None


__all__ = ["explain_object", "transition_event", "slot_created_event", "slot_deleted_event", "job_event", "output_event"]
