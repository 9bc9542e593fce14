"""What a purge does with a line it keeps because its writer is under a legal hold (``stores.logs.archive``).

A held writer B's line that mentions the erased subject A stays (GDPR Art. 17(3)(e): B's hold wins over A's
erasure), but it is sealed under A's key too, and the keys step shreds that key after the logs step: kept
as it was, the line would be bytes nobody can open, preserved for a hold that can no longer use them. So the
purge lifts A's layer in the same rewrite, under the segment's lock (``LineSealer.release``): the line stays
B's, sealed under B's key and any other mentioned subject's, and readable for B's hold. A line whose A layer
cannot be lifted (A's key already shredded, as for a late line a sweep finds after the shred) is kept byte for
byte and counted as unreadable: the receipt says which, never that every kept line is readable.

The counts are of lines only (no subject key, no words): ``readable`` and ``unreadable`` are the lines of
other writers kept under their holds; the subject's own lines kept under its own hold are in neither (nothing
of theirs is shredded while they are held).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from stores.logs.sealing import RELEASED, SEALED, LineSealer


@dataclass(frozen=True)
class KeptLine:
    line: bytes  # what the segment keeps: the line re-sealed without the subject's layer, or as it was
    readable: bool  # whether its writer can still open it once the subject's key is shredded


def keep_readable(line: bytes, subject: str, sealer: LineSealer | None) -> KeptLine:
    """The held line as the segment keeps it once ``subject`` is erased (its line end kept)."""
    body = line.rstrip(b"\r\n")
    end = line[len(body) :]
    try:
        record = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return KeptLine(line, readable=False)
    if not isinstance(record, dict):
        return KeptLine(line, readable=False)
    if SEALED not in record:  # a plain line (shipped before sealing): no key of the subject's closes it
        return KeptLine(line, readable=True)
    released = record.get(RELEASED)
    if isinstance(released, list) and subject in released:  # lifted by an earlier attempt: as it is
        return KeptLine(line, readable=True)
    lifted = sealer.release(record, subject) if sealer is not None else None
    if lifted is None:
        return KeptLine(line, readable=False)
    if lifted == record:  # not sealed under the subject at all
        return KeptLine(line, readable=True)
    text = json.dumps(lifted, ensure_ascii=False, separators=(",", ":"))
    return KeptLine(text.encode("utf-8") + end, readable=True)
