"""Which KMS key wraps the data keys: ``ERASURE_KMS_KEY_ID``, or, on the local stack, the key ``erasure stack
up`` created.

The local KMS endpoint (``workers.local_kms``) keeps its key's id and material in the state directory
(``local_key_state``); the stack launcher starts it with that file, and the worker's wiring reads the id
from it when no key is configured. Production wiring reads it from here, never from the stack launcher
(``workers/stack``): this module needs nothing but the settings and the file.
"""

from __future__ import annotations

import json
from pathlib import Path

from workers.errors import StackError
from workers.settings import Settings

#: the local KMS endpoint's key state, in the state directory (mode 0600: it holds the key material)
KEY_STATE_FILE = "kms-key.json"


def local_key_state(settings: Settings) -> Path:
    """Where the local KMS endpoint keeps its key (id and material)."""
    return settings.state_path / KEY_STATE_FILE


def read_key_id(path: Path) -> str | None:
    """The key id a local KMS key state file holds (``None`` when there is no file)."""
    if not path.exists():
        return None
    return str(json.loads(path.read_text())["key_id"])


def resolve_kms_key_id(settings: Settings) -> str:
    """``ERASURE_KMS_KEY_ID``, else the local stack's key (``StackError`` when ``erasure stack up`` made none)."""
    if settings.kms_key_id:
        return settings.kms_key_id
    key_id = read_key_id(local_key_state(settings))
    if not key_id:
        raise StackError("no KMS key configured: set ERASURE_KMS_KEY_ID or run 'erasure stack up'")
    return key_id
