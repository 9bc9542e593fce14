"""What stands in for a payload the orchestrator's codec refused (issue 40 item 4).

A payload not sealed with the orchestrator's key (plain JSON from ``temporal workflow signal``, Temporal
UI's forms, a forged ciphertext) used to fail the whole workflow task, for ever: a foreign ``hold_changed``
signal stranded the request. The codec now hands such a payload on as an empty ``binary/refused`` payload
(its bytes dropped), converted to a ``RefusedPayload``. The workflow interceptor (``workflows.foreign_payloads``)
drops a signal that carries one and refuses an update that does; any other use (a workflow input, an
activity's input, a result read by a client) raises ``PlaintextPayload`` at first touch, so a foreign
value is refused as before, never read.
"""

from __future__ import annotations

from typing import Any, NoReturn


class PlaintextPayload(ValueError):
    """A payload that is not encrypted with our codec, refused by a strict decode."""


REFUSED_MESSAGE = "refused a payload that is not encrypted with the orchestrator's key"


class RefusedPayload:
    """A refused payload's value: holds nothing of it, and refuses every use."""

    __slots__ = ()

    def __getattr__(self, name: str) -> NoReturn:
        if name.startswith("__"):  # copy, pickle and the like probe dunders: plain "no such attribute"
            raise AttributeError(name)
        raise PlaintextPayload(REFUSED_MESSAGE)

    def __iter__(self) -> NoReturn:
        raise PlaintextPayload(REFUSED_MESSAGE)

    def __repr__(self) -> str:
        return "RefusedPayload()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, RefusedPayload)

    def __hash__(self) -> int:
        return 0


def refused(values: Any) -> bool:
    """Whether any of ``values`` (handler arguments) is a refused payload."""
    return any(isinstance(v, RefusedPayload) for v in values)
