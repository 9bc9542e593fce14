"""The erasure saga: ``ErasureWorkflow`` (``workflow``) runs the request's plan (``plan``, the interpreter)
behind the hold gate (``hold_gate``), showing its progress on the board (``board``)."""

from workflows.erasure.calls import HEARTBEAT_TIMEOUT
from workflows.erasure.hold_gate import HOLD_RECHECK_MAX
from workflows.erasure.patches import FEWER_ACTIONS, PHYSICAL_AFTER_SWEEP, PLAN_FROM_WORKER
from workflows.erasure.workflow import ErasureWorkflow

__all__ = [
    "FEWER_ACTIONS",
    "HEARTBEAT_TIMEOUT",
    "HOLD_RECHECK_MAX",
    "PHYSICAL_AFTER_SWEEP",
    "PLAN_FROM_WORKER",
    "ErasureWorkflow",
]
