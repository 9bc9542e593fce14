"""What the model is sent after a forget (issue 39, item 7): ``stores.operations.live_redaction`` on its own.

The same number in any grouping is redacted, another number and the words around it are not; a quote of a
long item cut anywhere goes as one marker; patterns hold no text; a request's parts are redacted as copies,
and the session's own contents (which ADK shares with the request's parts) stay as they were.
"""

from __future__ import annotations

import json

from google.adk.models.llm_request import LlmRequest
from google.genai import types

from stores.ledgers.forget_tombstones import REDACTED, span_digest, span_patterns
from stores.operations.live_redaction import live_patterns, merge, redact_request, redact_text

SECRET = b"s" * 32
PYTHON, OK = types.Language.PYTHON, types.Outcome.OUTCOME_OK
ITEM = "My phone number is +49 151 2345 6789, please text me on it when my order from the bakery is ready."


def test_the_same_number_in_any_grouping_is_redacted_and_nothing_else() -> None:
    patterns = live_patterns(SECRET, [ITEM])
    for echo in ("+49 151 2345 6789", "+4915123456789", "49-151-2345-6789", "(49) 151/2345.6789"):
        assert redact_text(SECRET, f"I'll text {echo} when it is ready.", patterns) == (
            f"I'll text {REDACTED} when it is ready."
        ), echo
    for other in ("0151 2345 6789", "151 2345", "order 4711", "+49 151 2345 6780", "49151234567890"):
        assert redact_text(SECRET, f"call {other} now", patterns) == f"call {other} now", other


def test_a_quote_of_a_long_item_cut_anywhere_is_one_marker_and_other_words_stay() -> None:
    patterns = live_patterns(SECRET, [ITEM])
    quoted = 'something said: "My phone number is +49 151 2345 6789, please text me on it when my order from..."'
    assert redact_text(SECRET, quoted, patterns) == f'something said: "{REDACTED}..."'
    assert redact_text(SECRET, ITEM, patterns) == f"{REDACTED}."
    for kept in ("forget my phone number", "Book the table at Casa Lisboa on 12 May.", "when it is ready"):
        assert redact_text(SECRET, kept, patterns) == kept


def test_patterns_hold_no_text_and_read_the_older_span_form() -> None:
    patterns = live_patterns(SECRET, [ITEM], ["+4915123456789"])
    dumped = json.dumps(patterns)
    assert "6789" not in dumped
    assert "phone" not in dumped
    # a session's patterns written before (span_patterns) are read the same: one digest form
    older = span_patterns(SECRET, ["555 0142"])
    assert older["digests"] == [span_digest(SECRET, ["555", "0142"])]
    assert redact_text(SECRET, "call 555 0142", merge(older, {})) == f"call {REDACTED}"


def test_every_part_is_redacted_as_a_copy_and_the_session_contents_stay() -> None:
    patterns = live_patterns(SECRET, [ITEM])
    args = {"spans": ["+4915123456789"], "memory_ids": ["m1"]}
    answer = {"candidates": [{"id": "m1", "description": '"+49 151 2345 6789"'}]}
    session_parts = [
        types.Part(text="Sure, I'll text +49 151 2345 6789 when it is ready."),
        types.Part(function_call=types.FunctionCall(name="forget_memories", args=args)),
        types.Part(function_response=types.FunctionResponse(name="preview_forget", response=answer)),
        types.Part(executable_code=types.ExecutableCode(code="send('+49 151 2345 6789')", language=PYTHON)),
        types.Part(code_execution_result=types.CodeExecutionResult(outcome=OK, output="sent 4915123456789")),
    ]
    session = types.Content(role="model", parts=session_parts)
    before = session.model_dump_json()
    # ADK's request copies are shallow: a new Content and new Parts over the session's nested objects
    shallow = session.model_copy(update={"parts": [p.model_copy() for p in session_parts]})
    request = LlmRequest(
        contents=[shallow],
        config=types.GenerateContentConfig(system_instruction="The user's number: +49 151 2345 6789."),
    )
    redact_request(SECRET, request, patterns, patterns)
    sent = request.model_dump_json()
    assert "6789" not in sent
    assert "4915123456789" not in sent
    assert sent.count(REDACTED) == 6
    assert "when it is ready" in sent
    assert session.model_dump_json() == before  # the session's events are never changed
    assert args["spans"] == ["+4915123456789"]


def test_text_and_settled_patterns_apply_to_their_own_parts() -> None:
    """While the user chooses, the preview's answer still lists the items (only text parts are redacted)."""
    previewed = live_patterns(SECRET, [ITEM])
    answer = {"candidates": [{"id": "m1", "description": "+49 151 2345 6789"}]}
    request = LlmRequest(
        contents=[
            types.Content(role="user", parts=[types.Part(text="my number +49 151 2345 6789")]),
            types.Content(
                role="user",
                parts=[types.Part(function_response=types.FunctionResponse(name="preview_forget", response=answer))],
            ),
        ]
    )
    redact_request(SECRET, request, previewed, merge({}, {}))
    assert request.contents[0].parts is not None
    assert request.contents[0].parts[0].text == f"my number {REDACTED}"
    assert "6789" in request.contents[1].model_dump_json()
