"""ADK's preload, through the memory lifecycle: only settled rows above the preload threshold reach the model.

``PreloadMemoryTool`` puts whatever ``search_memory`` returns in front of the model on every turn. With the
lifecycle, search may return a challenged belief (flagged) or a row that has decayed to the search band; the
agent may look those up when asked, but they must not be put in front of it unasked. ``SettledMemoryPreload``
asks the platform's memory service for ``preload_memory`` instead (same formatting as ADK's tool); with any
other memory service it behaves exactly as ADK's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types

from stores.memory.entries import content_text
from stores.memory.service import FencedMemoryService, PostgresMemoryService

if TYPE_CHECKING:
    from google.adk.models.llm_request import LlmRequest
    from google.adk.tools.tool_context import ToolContext


class SettledMemoryPreload(PreloadMemoryTool):
    async def process_llm_request(self, *, tool_context: ToolContext, llm_request: LlmRequest) -> None:
        context = tool_context._invocation_context
        service = context.memory_service
        if not isinstance(service, FencedMemoryService | PostgresMemoryService):
            await super().process_llm_request(tool_context=tool_context, llm_request=llm_request)
            return
        query = content_text(tool_context.user_content)
        if not query.strip():
            return
        found = await service.preload_memory(app_name=context.app_name, user_id=context.user_id, query=query)
        lines: list[str] = []
        for memory in found.memories:
            if memory.timestamp:
                lines.append(f"Time: {memory.timestamp}")
            if text := content_text(memory.content):
                lines.append(f"{memory.author}: {text}" if memory.author else text)
        if not lines:
            return
        block = "\n".join(lines)
        llm_request._insert_transient_user_content(  # the same insertion ADK's own preload uses
            [
                types.Content(
                    role="user",
                    parts=[
                        types.Part.from_text(
                            text="The following content is from your previous conversations with the user.\n"
                            "They may be useful for answering the user's current query.\n"
                            f"<PAST_CONVERSATIONS>\n{block}\n</PAST_CONVERSATIONS>\n"
                        )
                    ],
                )
            ]
        )


settled_memory_preload = SettledMemoryPreload()
