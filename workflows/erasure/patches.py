"""The saga's patch ids, and where each is in its retirement (samples-python ``patching/``: ``patched``, then
``deprecate_patch``, then nothing).

Every request is filed with a plan, and the saga has one path. Its three last changes are **deprecated**: the
code calls ``workflow.deprecate_patch`` where it called ``workflow.patched`` and keeps only the new branch. A
history that took the new branch (it holds the marker) replays; a run of this code records the marker as
deprecated, so the next release may delete these calls once no run that recorded a marker is still open
(deploy/README.md, "Worker versioning": an old version's workers serve its pinned runs until it is
``drained``).

The older markers (``hold-gate-on-signal-v1``, ``parallel-deletion-v1``, ``holds-and-lifecycle-v1``)
guarded the built-in steps of requests filed before plans existed; those paths were deleted with their
activities, and no plan-driven run ever recorded one of them.
"""

from __future__ import annotations

#: each destructive step's own activity reads the hold store right before its work, every check of a
#: verification runs in one activity, and the search attributes are upserted once per workflow task, only
#: when a value changed (issue 19)
FEWER_ACTIONS = "fewer-actions-v1"
#: the plan's physical clean-up steps (``PlanStep.after_sweep``) run after the second sweep, so what the sweep
#: deleted is covered too (issue 28)
PHYSICAL_AFTER_SWEEP = "physical-after-sweep-v1"
#: the plan is decided where the work is done (issue 28): ``begin_request`` builds it from the worker's
#: registry, records it and returns it, and the saga acts on it. Since issue 41 it is decided only there (the
#: filer sends none, ``StepInput.plan_here`` is gone); the ``deprecate_patch`` call stays until the runs that
#: recorded the marker are drained: ``tests/histories/erasure_plan_from_worker.json`` holds it as a
#: non-deprecated marker, and a history with such a marker and no call is nondeterministic (TMPRL1100)
PLAN_FROM_WORKER = "plan-from-worker-v1"

DEPRECATED = (FEWER_ACTIONS, PHYSICAL_AFTER_SWEEP, PLAN_FROM_WORKER)
