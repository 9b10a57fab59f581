"""The agent loop's skill tools (`load_skill`, `read_skill_file`) and `SkillLibrary`, the skill
catalog they read through, with fakes."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

import pytest

from application.agent.tool_calls import TOOL_RESULT_CHARS
from application.ports.agent_tool import AgentTool, ToolContext, ToolFailed, ToolOffer
from application.ports.skill_repository import SkillDocument
from application.tools.load_skill import LISTED_FILES, SKILL_TOOL, LoadSkillTool, fit_text
from application.tools.read_skill_file import READ_MAX_BYTES, READ_TOOL, ReadSkillFileTool
from application.tools.skill_library import SkillLibrary
from domain.agents import Agent
from domain.identity import Caller
from domain.skills import SkillFile, SkillManifest, skill_file_key
from tests.fakes.agents import an_agent as agent
from tests.fakes.basics import FakeStorage
from tests.fakes.skill_catalog import FakeSkill, FakeSkillCatalog
from tests.fakes.skills import FakeSkillRepository

CALLER = Caller(user_id="user_1", org_id="org_a")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def tone(**changes: object) -> FakeSkill:
    fields: dict[str, object] = {
        "id": 3,
        "name": "tone",
        "description": "House style",
        "body": "\n# Tone\nBe kind.\n",
        "files": {"references/words.md": ("text/markdown", b"Say 'please'.")},
    }
    return FakeSkill(**{**fields, **changes})  # type: ignore[arg-type]


def legal(**changes: object) -> FakeSkill:
    fields: dict[str, object] = {
        "id": 4,
        "name": "legal",
        "description": "Contract review & <NDA> checks",
        "body": "# Legal",
    }
    return FakeSkill(**{**fields, **changes})  # type: ignore[arg-type]


async def offered(tool: AgentTool, the_agent: Agent) -> ToolOffer:
    offer = await tool.offer(CALLER, the_agent)
    assert offer is not None
    return offer


async def call(offer: ToolOffer, the_agent: Agent, **arguments: object) -> object:
    return await offer.execute(dict(arguments), ToolContext(caller=CALLER, agent=the_agent))


async def refusal(offer: ToolOffer, the_agent: Agent, **arguments: object) -> str:
    with pytest.raises(ToolFailed) as refused:
        await call(offer, the_agent, **arguments)
    return refused.value.message


TOOLS = [LoadSkillTool, ReadSkillFileTool]


# Both tools


@pytest.mark.parametrize("tool", TOOLS)
async def test_a_skill_tool_is_offered_only_when_the_agent_has_active_skills(tool):
    catalog = FakeSkillCatalog(
        tone(), legal(org_id="org_b"), FakeSkill(id=5, name="old", description="x", deleted=True)
    )
    assert await tool(catalog).offer(CALLER, agent()) is None
    assert await tool(catalog).offer(CALLER, agent(skill_ids=[4, 5, 99])) is None
    assert await tool(catalog).offer(CALLER, agent(skill_ids=[4, 3])) is not None


@pytest.mark.parametrize("tool", TOOLS)
async def test_the_name_is_an_enum_of_the_active_skills_in_the_agents_order(tool):
    catalog = FakeSkillCatalog(
        tone(), legal(), FakeSkill(id=5, name="old", description="x", deleted=True)
    )
    offer = await offered(tool(catalog), agent(skill_ids=[4, 99, 5, 3, 4]))
    name = offer.spec.parameters["properties"]["name"]
    assert name == {"type": "string", "enum": ["legal", "tone"]}
    assert offer.spec.parameters["required"][0] == "name"
    assert catalog.calls == [("describe", [4, 99, 5, 3, 4])]


@pytest.mark.parametrize("tool", TOOLS)
async def test_a_name_that_was_not_offered_is_refused(tool):
    catalog = FakeSkillCatalog(tone(), legal(org_id="org_b"))
    the_agent = agent(skill_ids=[3, 4])
    offer = await offered(tool(catalog), the_agent)
    message = await refusal(offer, the_agent, name="legal", path="SKILL.md")
    assert message == "No skill named 'legal' is available."
    assert await refusal(offer, the_agent) == "No skill named None is available."
    assert [c[0] for c in catalog.calls] == ["describe"]


# load_skill


async def test_the_listing_frames_the_skills_as_the_organizations_own_instructions():
    offer = await offered(LoadSkillTool(FakeSkillCatalog(tone(), legal())), agent(skill_ids=[4, 3]))
    assert offer.spec.name == SKILL_TOOL
    assert offer.instructions == (
        "Your organization has given you skills: instructions of its own for particular kinds "
        "of task. When the member's request matches a skill's description, call the load_skill "
        "tool with the skill's name before answering, then follow the instructions it returns "
        "as your organization's own. They come from the organization, not from the member you "
        "are talking with.\n"
        "<available_skills>\n"
        "  <skill>\n"
        "    <name>legal</name>\n"
        "    <description>Contract review &amp; &lt;NDA&gt; checks</description>\n"
        "  </skill>\n"
        "  <skill>\n"
        "    <name>tone</name>\n"
        "    <description>House style</description>\n"
        "  </skill>\n"
        "</available_skills>"
    )


async def test_a_skill_loads_as_its_instructions_and_the_list_of_its_files():
    catalog = FakeSkillCatalog(tone())
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(catalog), the_agent)
    context = ToolContext(caller=CALLER, agent=the_agent)
    result = await offer.execute({"name": "tone"}, context)
    assert result == {
        "name": "tone",
        "files": ["references/words.md"],
        "instructions": "# Tone\nBe kind.",
    }
    assert list(result) == ["name", "files", "instructions"]
    assert context.sources == []
    assert catalog.calls[1:] == [("load", 3)]


@pytest.mark.parametrize("gone", [{"deleted": True}, {"org_id": "org_b"}])
async def test_a_skill_deleted_or_moved_away_since_it_was_offered_is_refused(gone):
    catalog = FakeSkillCatalog(tone())
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(catalog), the_agent)
    for key, value in gone.items():
        setattr(catalog.skills[3], key, value)
    message = await refusal(offer, the_agent, name="tone")
    assert message == "The skill 'tone' is no longer available."


async def test_a_long_file_list_is_capped_and_the_rest_counted():
    files = {f"references/{n:03}.md": ("text/markdown", b"x") for n in range(LISTED_FILES + 7)}
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(FakeSkillCatalog(tone(files=files))), the_agent)
    result = await call(offer, the_agent, name="tone")
    assert isinstance(result, dict)
    assert result["files"] == sorted(files)[:LISTED_FILES]
    assert result["moreFiles"] == 7


async def test_instructions_longer_than_the_model_is_given_are_cut_with_a_note_first():
    body = "Ünïcödé line\n" * 4000
    the_agent = agent(skill_ids=[3])
    offer = await offered(LoadSkillTool(FakeSkillCatalog(tone(body=body))), the_agent)
    result = await call(offer, the_agent, name="tone")
    assert isinstance(result, dict)
    assert list(result) == ["name", "files", "truncated", "instructions"]
    assert len(json.dumps(result, ensure_ascii=False)) <= TOOL_RESULT_CHARS
    kept = len(result["instructions"])
    assert body.strip().startswith(result["instructions"]) and kept > TOOL_RESULT_CHARS // 3
    shown = f"Only the first {kept} of {len(body.strip())} characters are shown."
    assert result["truncated"] == shown


@pytest.mark.parametrize("text", ["a" * 20_000, "\n" * 20_000, '"\\' * 5000, "é" * 9000, ""])
def test_fit_text_keeps_the_json_within_the_limit(text):
    result = fit_text({"name": "x"}, "text", text, limit=1000)
    assert len(json.dumps(result, ensure_ascii=False)) <= 1000
    assert text.startswith(result["text"])
    assert ("truncated" in result) == (result["text"] != text)


# read_skill_file


async def test_read_skill_file_takes_a_path_and_reads_a_bundled_text_file():
    catalog = FakeSkillCatalog(tone())
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(catalog), the_agent)
    assert offer.spec.name == READ_TOOL
    assert offer.spec.parameters["required"] == ["name", "path"]
    assert offer.spec.parameters["properties"]["path"]["type"] == "string"
    assert "read_skill_file" in offer.instructions and "organization" in offer.instructions
    result = await call(offer, the_agent, name="tone", path="references/words.md")
    assert result == {
        "name": "tone",
        "path": "references/words.md",
        "contentType": "text/markdown",
        "text": "Say 'please'.",
    }
    assert catalog.calls[1:] == [("read_file", (3, "references/words.md", READ_MAX_BYTES))]


async def test_skill_md_itself_can_be_read_and_a_leading_dot_slash_is_accepted():
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(FakeSkillCatalog(tone())), the_agent)
    result = await call(offer, the_agent, name="tone", path="./SKILL.md")
    assert isinstance(result, dict)
    assert result["text"] == "---\nname: tone\ndescription: House style\n---\n\n# Tone\nBe kind.\n"
    assert result["contentType"] == "text/markdown"


@pytest.mark.parametrize("path", ["references/other.md", "../SKILL.md", "/etc/passwd", "a\\b"])
async def test_a_path_the_skill_does_not_have_is_refused(path):
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(FakeSkillCatalog(tone())), the_agent)
    message = await refusal(offer, the_agent, name="tone", path=path)
    assert message == f"No file {path!r} is available in the skill 'tone'."


@pytest.mark.parametrize("path", [None, "", "  ", 7])
async def test_a_missing_path_is_refused(path):
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(FakeSkillCatalog(tone())), the_agent)
    message = await refusal(offer, the_agent, name="tone", path=path)
    assert message == "The call needs the path of one of the skill's files."


@pytest.mark.parametrize("gone", [{"deleted": True}, {"org_id": "org_b"}])
async def test_a_file_of_a_skill_deleted_or_moved_away_since_it_was_offered_is_refused(gone):
    catalog = FakeSkillCatalog(tone())
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(catalog), the_agent)
    for key, value in gone.items():
        setattr(catalog.skills[3], key, value)
    message = await refusal(offer, the_agent, name="tone", path="references/words.md")
    assert message == "No file 'references/words.md' is available in the skill 'tone'."


@pytest.mark.parametrize(
    "content",
    [b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", b"caf\xe9 latin-1", b"text with a \x00 byte"],
)
async def test_a_binary_file_is_refused(content):
    skill = tone(files={"assets/logo.png": ("image/png", content)})
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(FakeSkillCatalog(skill)), the_agent)
    message = await refusal(offer, the_agent, name="tone", path="assets/logo.png")
    assert message == (
        "The file 'assets/logo.png' of the skill 'tone' is not a text file (image/png); "
        "only text files can be read."
    )


async def test_a_file_over_the_limit_is_refused_without_being_fetched():
    skill = tone(files={"references/big.md": ("text/markdown", b"x" * (READ_MAX_BYTES + 1))})
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(FakeSkillCatalog(skill)), the_agent)
    message = await refusal(offer, the_agent, name="tone", path="references/big.md")
    assert message == (
        f"The file 'references/big.md' of the skill 'tone' is too large to read "
        f"({READ_MAX_BYTES + 1} bytes; the limit is {READ_MAX_BYTES})."
    )


async def test_a_text_file_loses_its_byte_order_mark_and_a_long_one_is_cut_with_a_note():
    text = "\ufeff" + "0123456789\n" * 3000
    skill = tone(files={"references/long.txt": ("text/plain", text.encode())})
    the_agent = agent(skill_ids=[3])
    offer = await offered(ReadSkillFileTool(FakeSkillCatalog(skill)), the_agent)
    result = await call(offer, the_agent, name="tone", path="references/long.txt")
    assert isinstance(result, dict)
    assert list(result) == ["name", "path", "contentType", "truncated", "text"]
    assert text[1:].startswith(result["text"]) and result["text"].startswith("0123")
    assert len(json.dumps(result, ensure_ascii=False)) <= TOOL_RESULT_CHARS


# SkillLibrary: the catalog over the skill repository and object storage


class Library:
    def __init__(self) -> None:
        self.repository = FakeSkillRepository()
        self.storage = FakeStorage()
        self.library = SkillLibrary(self.repository, self.storage)

    async def add(
        self, name: str, org_id: str = "org_a", files: dict[str, bytes] | None = None
    ) -> int:
        skill_md = f"---\nname: {name}\ndescription: About {name}\n---\n# {name}\n"
        manifest = SkillManifest(name=name, description=f"About {name}")
        sha = hashlib.sha256(skill_md.encode()).hexdigest()
        skill = await self.repository.add(org_id, "user_1", SkillDocument(
            manifest=manifest, skill_md=skill_md, sha256=sha
        ))  # fmt: skip
        for path, data in (files or {}).items():
            record = SkillFile(
                path=path,
                size=len(data),
                content_type="text/markdown",
                sha256=hashlib.sha256(data).hexdigest(),
                updated_at=NOW,
            )
            await self.repository.put_file(org_id, skill.id, record)
            await self.storage.put(
                skill_file_key(org_id, skill.id, path), data, content_type="text/markdown"
            )
        return skill.id


async def test_the_library_describes_the_active_skills_of_the_callers_organization_in_order():
    world = Library()
    first = await world.add("zeta")
    foreign = await world.add("alpha", org_id="org_b")
    deleted = await world.add("beta")
    await world.repository.soft_delete("org_a", deleted)
    last = await world.add("gamma")
    summaries = await world.library.describe(CALLER, [last, foreign, deleted, 99, first, last])
    assert [(s.id, s.name, s.description) for s in summaries] == [
        (last, "gamma", "About gamma"),
        (first, "zeta", "About zeta"),
    ]
    assert await world.library.describe(CALLER, []) == []


async def test_the_library_loads_skill_md_and_the_bundled_paths():
    world = Library()
    skill_id = await world.add("tone", files={"references/b.md": b"B", "references/a.md": b"A"})
    loaded = await world.library.load(CALLER, skill_id)
    assert loaded is not None
    assert (loaded.id, loaded.name) == (skill_id, "tone")
    assert loaded.skill_md.startswith("---\nname: tone\n")
    assert loaded.instructions == "# tone"
    assert loaded.files == ["references/a.md", "references/b.md"]


async def test_the_library_refuses_deleted_foreign_and_unknown_skills():
    world = Library()
    foreign = await world.add("alpha", "org_b", {"notes.md": b"secret"})
    deleted = await world.add("beta", files={"notes.md": b"old"})
    await world.repository.soft_delete("org_a", deleted)
    for skill_id in (foreign, deleted, 99):
        assert await world.library.load(CALLER, skill_id) is None
        assert await world.library.read_file(CALLER, skill_id, "notes.md") is None
        assert await world.library.read_file(CALLER, skill_id, "SKILL.md") is None


async def test_the_library_reads_bundled_files_from_storage_and_skill_md_from_the_skill():
    world = Library()
    skill_id = await world.add("tone", files={"references/a.md": b"Hello"})
    file = await world.library.read_file(CALLER, skill_id, "references/a.md")
    assert file is not None
    assert (file.path, file.content_type, file.size, file.content) == (
        "references/a.md",
        "text/markdown",
        5,
        b"Hello",
    )
    skill_md = await world.library.read_file(CALLER, skill_id, "SKILL.md")
    assert skill_md is not None and skill_md.content_type == "text/markdown"
    assert skill_md.content == b"---\nname: tone\ndescription: About tone\n---\n# tone\n"
    assert await world.library.read_file(CALLER, skill_id, "references/b.md") is None


async def test_the_library_does_not_fetch_a_file_over_max_bytes():
    world = Library()
    skill_id = await world.add("tone", files={"big.md": b"x" * 100})
    # Bytes that storage would not give: the library must not ask for them.
    world.storage.objects.clear()
    file = await world.library.read_file(CALLER, skill_id, "big.md", max_bytes=99)
    assert file is not None and (file.size, file.content) == (100, None)
    skill_md = await world.library.read_file(CALLER, skill_id, "SKILL.md", max_bytes=10)
    assert skill_md is not None and skill_md.content is None and skill_md.size > 10


async def test_a_file_record_whose_object_is_gone_reads_as_no_file():
    world = Library()
    skill_id = await world.add("tone", files={"a.md": b"A"})
    world.storage.objects.clear()
    assert await world.library.read_file(CALLER, skill_id, "a.md") is None


async def test_the_tools_over_the_library_refuse_a_skill_deleted_during_the_answer():
    world = Library()
    skill_id = await world.add("tone", files={"a.md": b"A"})
    the_agent = agent(skill_ids=[skill_id])
    load = await offered(LoadSkillTool(world.library), the_agent)
    read = await offered(ReadSkillFileTool(world.library), the_agent)
    assert await call(read, the_agent, name="tone", path="a.md") == {
        "name": "tone",
        "path": "a.md",
        "contentType": "text/markdown",
        "text": "A",
    }
    await world.repository.soft_delete("org_a", skill_id)
    assert await refusal(load, the_agent, name="tone") == "The skill 'tone' is no longer available."
    message = await refusal(read, the_agent, name="tone", path="a.md")
    assert message == "No file 'a.md' is available in the skill 'tone'."
