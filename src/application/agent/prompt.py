"""The prompt of an answer: the instructions (the agent's role, who it is, the knowledge-base
passages found for the member's message, what the offered tools add), then the conversation's
latest messages."""

from __future__ import annotations

from collections.abc import Sequence

from application.ports.chat_model import ChatTurn
from application.ports.knowledge_search import PASSAGE_CHARS, QUERY_CHARS, KnowledgeSearch
from domain.agents import Agent
from domain.chunks import SearchResult
from domain.conversations import StoredMessage
from domain.identity import Caller

MAX_HISTORY = 40
CONTEXT_PASSAGES = 4
DEFAULT_INSTRUCTIONS = "You are a helpful assistant."


async def search_passages(
    search: KnowledgeSearch, caller: Caller, agent: Agent, history: Sequence[StoredMessage]
) -> list[SearchResult]:
    """The best passages of the agent's knowledge bases for the member's latest message, from
    the files its knowledge filters let through (none when the agent has no knowledge base or
    the message no text)."""
    question = latest_user_text(history)
    if not agent.knowledge_base_ids or not question:
        return []
    return await search.search(
        caller,
        agent.knowledge_base_ids,
        question[:QUERY_CHARS],
        CONTEXT_PASSAGES,
        filters=agent.knowledge_filter(),
    )


def prompt_turns(
    agent: Agent,
    history: Sequence[StoredMessage],
    passages: Sequence[SearchResult],
    tool_instructions: Sequence[str],
) -> list[ChatTurn]:
    """The system turn, then the latest `MAX_HISTORY` messages that have text."""
    system = instructions(agent, passages, tool_instructions)
    return [ChatTurn(role="system", content=system), *history_turns(history)]


def instructions(
    agent: Agent, passages: Sequence[SearchResult], tool_instructions: Sequence[str]
) -> str:
    sections = [agent.role.strip() or DEFAULT_INSTRUCTIONS]
    if agent.name:
        about = f"Your name is {agent.name}."
        if agent.description:
            about += f" {agent.description.strip()}"
        sections.append(about)
    if passages:
        lines = [
            "Passages from the organization's knowledge bases that may help. Use them when "
            "they are relevant and mention the file they come from:"
        ]
        for number, passage in enumerate(passages, start=1):
            where = passage.file_name
            if passage.page_number is not None:
                where += f", page {passage.page_number}"
            lines.append(f"[{number}] ({where}) {passage.text[:PASSAGE_CHARS].strip()}")
        sections.append("\n".join(lines))
    sections.extend(tool_instructions)
    return "\n\n".join(sections)


def latest_user_text(history: Sequence[StoredMessage]) -> str:
    for message in reversed(history):
        if message.role == "user":
            return user_content(message)
    return ""


def user_content(message: StoredMessage) -> str:
    lines = []
    for part in message.parts:
        if part.get("type") == "text":
            lines.append(str(part.get("text", "")))
        elif part.get("type") == "file":
            name = part.get("filename") or "unnamed file"
            lines.append(f"[Attached file: {name} ({part.get('mediaType', 'unknown type')})]")
    return "\n\n".join(line for line in lines if line)


def history_turns(history: Sequence[StoredMessage]) -> list[ChatTurn]:
    turns: list[ChatTurn] = []
    for message in list(history)[-MAX_HISTORY:]:
        if message.role == "user":
            content = user_content(message)
            if content:
                turns.append(ChatTurn(role="user", content=content))
        elif message.role == "assistant":
            text = "".join(
                str(p.get("text", "")) for p in message.parts if p.get("type") == "text"
            ).strip()
            if text:
                turns.append(ChatTurn(role="assistant", content=text))
    return turns
