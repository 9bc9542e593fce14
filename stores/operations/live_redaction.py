"""Forgetting reaches the live conversation (issue 39, item 7): what the model is sent, redacted.

A confirmed forget deletes the items from the stores, but the session still in progress holds them: the user's
own turn, the agent's reply quoting a number back, the preview tool's answer listing them, the call that named
the detail to block. ADK sends all of it to the model again on every request, so a ``before_model_callback``
(``stores.operations.forget_tools.redact_forgotten``) rewrites every part of the request, text, function calls'
arguments, function responses, code and its results, and the system instruction, with ``redact_request``.

What is redacted is described by patterns kept in session state, keyed hashes and word counts, never text:

- ``digests``/``lengths``: keyed hashes of word runs, in ``span_digest``'s form (a session's patterns written
  before this module read the same): each whole item of up to ``MAX_SPAN_WORDS`` words, each detail the user
  named, and every ``ECHO_WORDS``-word run of an item's words that is not only stopwords, so the item, or a
  quote of it cut anywhere (the preview's 80-character quotes), is found whatever its length;
- ``numbers``: keyed hashes of the digits of every number an item or a detail holds (a run of all-digit words
  with at least ``MIN_DIGITS`` digits), so the same number is found in any grouping or punctuation: the user's
  "+49 151 2345 6789" in the agent's "+4915123456789" or "49-151-2345-6789".

Matching is on exact normalised words and exact digits, the way an echo is found (``stores.forgetting.
resolution``), never on substrings of a word: another number or a text that shares fewer words stays as it was.
Every matched run becomes one ``REDACTED`` marker (overlapping and adjacent runs merge, so no fragment of the
item survives between two markers). The session's own events are never changed: ADK copies each part into the
request, and only the request's copies are replaced.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from stores.forgetting.resolution import ECHO_WORDS, MIN_DIGITS, STOPWORDS
from stores.ledgers.forget_tombstones import MAX_SPAN_WORDS, REDACTED
from stores.privacy.embedding import WORD, tokens
from stores.privacy.identity import derived_key

if TYPE_CHECKING:
    from google.adk.models.llm_request import LlmRequest
    from google.genai import types

Patterns = dict[str, list[Any]]

#: the most words one number is written in ("+49 (0) 151 23 45 67 89"): bounds the windows tried per run
MAX_NUMBER_WORDS = 8
#: what may stand between the words of one number: spaces and the usual grouping marks
_NUMBER_GAP = re.compile(r"[\s\-./()+]*")
#: what may stand between two redacted runs for them to become one marker
_MARK_GAP = re.compile(r"\W*")

KEYS = ("digests", "lengths", "numbers")


@lru_cache(maxsize=8)
def _key(secret: bytes, purpose: str) -> bytes:
    return derived_key(secret, purpose)


def _span(secret: bytes, words: Iterable[str]) -> str:
    """``stores.ledgers.forget_tombstones.span_digest`` with its key derived once, not per window."""
    return hmac.new(_key(secret, "forget-span"), " ".join(words).encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def _number(secret: bytes, digits: str) -> str:
    return hmac.new(_key(secret, "forget-number"), digits.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def _words(text: str) -> list[tuple[int, int, str]]:
    return [(m.start(), m.end(), m.group(0).lower()) for m in WORD.finditer(text)]


def _number_runs(text: str, words: list[tuple[int, int, str]]) -> list[list[int]]:
    """Indexes of the words of each number in ``text``: all-digit words joined by spaces or grouping marks."""
    runs: list[list[int]] = []
    for i, (start, _end, word) in enumerate(words):
        if not word.isdecimal():
            continue
        if runs and runs[-1][-1] == i - 1 and _NUMBER_GAP.fullmatch(text, words[i - 1][1], start):
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def live_patterns(secret: bytes, items: Iterable[str], details: Iterable[str] = ()) -> Patterns:
    """The patterns that redact forgotten ``items`` (their whole texts, any length) and ``details`` (the exact
    words the user named) from the conversation: keyed hashes and word counts only."""
    items, details = list(items), list(details)
    runs: set[tuple[str, ...]] = set()
    numbers: set[str] = set()
    for text in [*items, *details]:
        words = tokens(text)
        if words and len(words) <= MAX_SPAN_WORDS:
            runs.add(tuple(words))
        found = _words(text)
        for number in _number_runs(text, found):
            digits = "".join(found[i][2] for i in number)
            if len(digits) >= MIN_DIGITS:
                numbers.add(digits)
    for text in items:  # a quote of the item, cut anywhere: its runs of words
        words = tokens(text)
        for k in range(0, len(words) - ECHO_WORDS + 1):
            run = tuple(words[k : k + ECHO_WORDS])
            if not all(w in STOPWORDS for w in run):
                runs.add(run)
    return {
        "digests": sorted({_span(secret, r) for r in runs}),
        "lengths": sorted({len(r) for r in runs}),
        "numbers": sorted({_number(secret, d) for d in numbers}),
    }


def merge(old: Any, new: Patterns) -> Patterns:
    """Two sets of patterns as one (``old`` as read from session state: anything not a dict is nothing)."""
    old = old if isinstance(old, dict) else {}
    return {k: sorted(set(old.get(k) or []) | set(new.get(k) or [])) for k in KEYS}


def redact_text(secret: bytes, text: str, patterns: Patterns) -> str:
    """``text`` with every run of words or digits the patterns cover replaced by one ``REDACTED`` marker."""
    digests = set(patterns.get("digests") or [])
    numbers = set(patterns.get("numbers") or [])
    if not text or not (digests or numbers):
        return text
    words = _words(text)
    cuts: list[tuple[int, int]] = []
    if digests:
        for n in sorted({int(n) for n in patterns.get("lengths") or []}):
            for i in range(0, len(words) - n + 1):
                if _span(secret, (w for _s, _e, w in words[i : i + n])) in digests:
                    cuts.append((words[i][0], words[i + n - 1][1]))
    if numbers:
        for run in _number_runs(text, words):
            for i, first in enumerate(run):
                digits = ""
                for last in run[i : i + MAX_NUMBER_WORDS]:
                    digits += words[last][2]
                    if len(digits) >= MIN_DIGITS and _number(secret, digits) in numbers:
                        cuts.append((_opening(text, words[first][0]), words[last][1]))
    return _cut(text, cuts)


def _opening(text: str, start: int) -> int:
    """Where a number starts with the marks written before its first digit ("+49", "(0151)")."""
    while start and text[start - 1] in "+(":
        start -= 1
    return start


def _cut(text: str, cuts: list[tuple[int, int]]) -> str:
    merged: list[list[int]] = []
    for start, end in sorted(cuts):
        if merged and (start <= merged[-1][1] or _MARK_GAP.fullmatch(text, merged[-1][1], start)):
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + REDACTED + text[end:]
    return text


def redact_value(secret: bytes, value: Any, patterns: Patterns) -> Any:
    """Every string inside a tool's answer or arguments (dicts and lists, any depth), redacted; a new value,
    never the one given changed in place (ADK shares the arguments with the session's events)."""
    if isinstance(value, str):
        return redact_text(secret, value, patterns)
    if isinstance(value, dict):
        return {k: redact_value(secret, v, patterns) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(secret, v, patterns) for v in value]
    return value


def _part(secret: bytes, part: types.Part, text: Patterns, settled: Patterns) -> types.Part:
    """A copy of ``part`` redacted: its text with ``text``; calls, responses and code with ``settled`` (what the
    user confirmed: while they choose, the preview's answer must still show them the items)."""
    update: dict[str, Any] = {}
    if part.text:
        update["text"] = redact_text(secret, part.text, text)
    if part.function_call is not None and part.function_call.args:
        args = redact_value(secret, part.function_call.args, settled)
        update["function_call"] = part.function_call.model_copy(update={"args": args})
    if part.function_response is not None and part.function_response.response:
        answer = redact_value(secret, part.function_response.response, settled)
        update["function_response"] = part.function_response.model_copy(update={"response": answer})
    if part.executable_code is not None and part.executable_code.code:
        code = redact_text(secret, part.executable_code.code, settled)
        update["executable_code"] = part.executable_code.model_copy(update={"code": code})
    if part.code_execution_result is not None and part.code_execution_result.output:
        output = redact_text(secret, part.code_execution_result.output, settled)
        update["code_execution_result"] = part.code_execution_result.model_copy(update={"output": output})
    return part.model_copy(update=update) if update else part


def redact_request(secret: bytes, llm_request: LlmRequest, text: Patterns, settled: Patterns) -> None:
    """Replace ``llm_request``'s contents and system instruction with redacted copies (nothing shared with the
    session is changed in place)."""
    llm_request.contents = [
        content.model_copy(update={"parts": [_part(secret, p, text, settled) for p in content.parts]})
        if content.parts
        else content
        for content in llm_request.contents
    ]
    config = llm_request.config
    if config is None or config.system_instruction is None:
        return
    from google.genai import types

    system = config.system_instruction
    if isinstance(system, str):
        config.system_instruction = redact_text(secret, system, text)
    elif isinstance(system, types.Part):
        config.system_instruction = _part(secret, system, text, settled)
    elif isinstance(system, types.Content) and system.parts:
        config.system_instruction = system.model_copy(
            update={"parts": [_part(secret, p, text, settled) for p in system.parts]}
        )
    elif isinstance(system, list):
        config.system_instruction = [
            redact_text(secret, s, text)
            if isinstance(s, str)
            else _part(secret, s, text, settled)
            if isinstance(s, types.Part)
            else s
            for s in system
        ]
