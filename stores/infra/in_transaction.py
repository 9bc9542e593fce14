"""``Also``: work a store runs inside its own write's transaction, so that two records commit together.

The console passes the audit entry of a decision (an approval, a denial, a legal hold placed or released) to
the store that records the decision: both rows are committed, or neither is, and no decision exists that the
audit log does not show.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from psycopg import Connection

#: called with the open transaction's connection, after the store's own write and before the commit
Also = Callable[[Connection[Any]], object]
