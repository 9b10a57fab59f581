"""The agent loop's two tools with fakes: knowledge search and skill loading."""

from __future__ import annotations

import pytest

from application.ports.agent_tool import ToolContext, ToolFailed, ToolOffer
from application.ports.knowledge_search import PASSAGE_CHARS
from application.ports.skill_catalog import SkillSummary
from application.tools.knowledge_search import SEARCH_TOOL, KnowledgeSearchTool
from application.tools.load_skill import SKILL_TOOL, LoadSkillTool
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.identity import Caller
from tests.fakes.agents import an_agent as agent
from tests.fakes.chat import FakeKnowledgeSearch, FakeSkillCatalog

CALLER = Caller(user_id="user_1", org_id="org_a")
TONE = SkillSummary(id=3, name="tone", description="House style")
LEGAL = SkillSummary(id=4, name="legal", description="Contract review")


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


async def offered(tool: KnowledgeSearchTool | LoadSkillTool, the_agent: Agent) -> ToolOffer:
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


# Skill loading


async def test_skills_are_offered_only_when_the_agent_has_active_ones():
    catalog = FakeSkillCatalog({3: (TONE, "# Tone")})
    tool = LoadSkillTool(catalog)
    assert await tool.offer(CALLER, agent()) is None
    assert await tool.offer(CALLER, agent(skill_ids=[99])) is None


async def test_the_offer_lists_the_active_skills_in_the_schema_and_the_instructions():
    catalog = FakeSkillCatalog({3: (TONE, "# Tone"), 4: (LEGAL, "# Legal")})
    offer = await offered(LoadSkillTool(catalog), agent(skill_ids=[4, 99, 3]))
    assert offer.spec.name == SKILL_TOOL
    assert offer.spec.parameters["properties"]["name"]["enum"] == ["legal", "tone"]
    assert offer.instructions == (
        "Skills you can load with the load_skill tool when useful:\n"
        "- legal: Contract review\n"
        "- tone: House style"
    )


async def test_a_skill_is_loaded_by_name():
    catalog = FakeSkillCatalog({3: (TONE, "# Tone\nBe kind.")})
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(catalog), the_agent)
    context = ToolContext(caller=CALLER, agent=the_agent)
    result = await offer.execute({"name": "tone"}, context)
    assert result == {"name": "tone", "instructions": "# Tone\nBe kind."}
    assert context.sources == []


async def test_only_a_skill_listed_in_the_offer_can_be_loaded():
    catalog = FakeSkillCatalog({3: (TONE, "# Tone"), 4: (LEGAL, "# Legal")})
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(catalog), the_agent)
    with pytest.raises(ToolFailed) as refused:
        await offer.execute({"name": "legal"}, ToolContext(caller=CALLER, agent=the_agent))
    assert refused.value.message == "No skill named 'legal' is available."


async def test_a_skill_gone_since_it_was_offered_is_refused():
    catalog = FakeSkillCatalog({3: (TONE, "# Tone")})
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(catalog), the_agent)
    del catalog.skills[3]
    with pytest.raises(ToolFailed) as refused:
        await offer.execute({"name": "tone"}, ToolContext(caller=CALLER, agent=the_agent))
    assert refused.value.message == "The skill 'tone' is no longer available."
