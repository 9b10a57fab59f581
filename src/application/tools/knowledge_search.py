from __future__ import annotations

from typing import Any

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.chat_model import ToolSpec
from application.ports.knowledge_search import PASSAGE_CHARS, QUERY_CHARS, KnowledgeSearch
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.identity import Caller

SEARCH_TOOL = "search_knowledge_base"
SEARCH_RESULTS = 6

SPEC = ToolSpec(
    name=SEARCH_TOOL,
    description="Search the organization's knowledge bases for passages that "
    "answer a question. Returns passages with their file name and page.",
    parameters={
        "type": "object",
        "properties": {"query": {"type": "string", "description": "What to find"}},
        "required": ["query"],
    },
)


class KnowledgeSearchTool:
    """`search_knowledge_base`: the model searches the agent's knowledge bases with a query of
    its own, within the files the agent's knowledge filters let through (the model cannot widen
    them: its call holds only the query). Offered only to an agent with knowledge bases. The
    result is the best passages (source id, file name, page, text), and each becomes a source
    of the answer."""

    def __init__(self, search: KnowledgeSearch) -> None:
        self._search = search

    async def offer(self, caller: Caller, agent: Agent) -> ToolOffer | None:
        if not agent.knowledge_base_ids:
            return None
        return ToolOffer(spec=SPEC, execute=self.execute)

    async def execute(self, arguments: dict[str, Any], context: ToolContext) -> Any:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolFailed("The search needs a non-empty query.")
        passages = await self._search.search(
            context.caller,
            context.agent.knowledge_base_ids,
            query.strip()[:QUERY_CHARS],
            SEARCH_RESULTS,
            filters=context.agent.knowledge_filter(),
        )
        context.cite(passages)
        return [_passage(p) for p in passages]


def _passage(result: SearchResult) -> dict[str, Any]:
    return {
        "sourceId": f"chunk-{result.chunk_id}",
        "fileName": result.file_name,
        "pageNumber": result.page_number,
        "text": result.text[:PASSAGE_CHARS],
    }
