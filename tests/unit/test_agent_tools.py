"""The agent loop's knowledge search tool with fakes (the skill tools: `test_skill_tools`)."""

from __future__ import annotations

import pytest

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.knowledge_search import PASSAGE_CHARS
from application.tools.knowledge_search import SEARCH_TOOL, KnowledgeSearchTool
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.identity import Caller
from tests.fakes.agents import an_agent as agent
from tests.fakes.chat import FakeKnowledgeSearch

CALLER = Caller(user_id="user_1", org_id="org_a")


def passage(chunk_id: int, page: int | None = 3, text: str = "25 days of leave.") -> SearchResult:
    return SearchResult(
        file_id="f1",
        file_name="handbook.pdf",
        knowledge_base_id=1,
        chunk_id=chunk_id,
        text=text,
        score=0.9,
        page_number=page,
    )


async def offered(tool: KnowledgeSearchTool, the_agent: Agent) -> ToolOffer:
    offer = await tool.offer(CALLER, the_agent)
    assert offer is not None
    return offer


# Knowledge search


async def test_search_is_offered_only_to_an_agent_with_knowledge_bases():
    tool = KnowledgeSearchTool(FakeKnowledgeSearch())
    assert await tool.offer(CALLER, agent()) is None
    offer = await offered(tool, agent(knowledge_base_ids=[1]))
    assert offer.spec.name == SEARCH_TOOL
    assert offer.spec.parameters["required"] == ["query"]
    assert offer.instructions == ""


async def test_search_returns_passages_and_cites_them():
    search = FakeKnowledgeSearch([passage(11, text="x" * 5000), passage(12, page=None)])
    the_agent = agent(knowledge_base_ids=[1, 2])
    offer = await offered(KnowledgeSearchTool(search), the_agent)
    context = ToolContext(caller=CALLER, agent=the_agent)
    result = await offer.execute({"query": "  leave  "}, context)
    assert search.queries == [([1, 2], "leave", 6)]
    assert result == [
        {
            "sourceId": "chunk-11",
            "fileName": "handbook.pdf",
            "pageNumber": 3,
            "text": "x" * PASSAGE_CHARS,
        },
        {
            "sourceId": "chunk-12",
            "fileName": "handbook.pdf",
            "pageNumber": None,
            "text": "25 days of leave.",
        },
    ]
    assert [p.chunk_id for p in context.sources] == [11, 12]


async def test_a_long_query_is_cut_to_2000_characters():
    search = FakeKnowledgeSearch()
    the_agent = agent(knowledge_base_ids=[1])
    offer = await offered(KnowledgeSearchTool(search), the_agent)
    await offer.execute({"query": "q" * 3000}, ToolContext(caller=CALLER, agent=the_agent))
    assert len(search.queries[0][1]) == 2000


@pytest.mark.parametrize("arguments", [{}, {"query": "   "}, {"query": 42}])
async def test_search_refuses_a_missing_or_empty_query(arguments):
    search = FakeKnowledgeSearch([passage(11)])
    the_agent = agent(knowledge_base_ids=[1])
    offer = await offered(KnowledgeSearchTool(search), the_agent)
    context = ToolContext(caller=CALLER, agent=the_agent)
    with pytest.raises(ToolFailed) as refused:
        await offer.execute(arguments, context)
    assert refused.value.message == "The search needs a non-empty query."
    assert search.queries == [] and context.sources == []
