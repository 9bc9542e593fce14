"""What an activity declaration in a contract raises if it is ever called in place of its implementation.

Workflows call activities by these typed declarations (``workflow.execute_activity(declared, ...)``); the
worker registers the implementations in ``activities/`` under the same names. One helper for every contract.
"""

from __future__ import annotations


def declared_only() -> NotImplementedError:
    return NotImplementedError("an activity declaration: the worker runs the implementation in activities/")
