"""Hybrid search: the vector rankings (`PgChunkRepository.nearest`, pgvector) and the BM25
rankings (`text_search`) of a query, fused by weighted reciprocal rank, with one round of
relevance feedback, then each passage's details and highlights.

Feedback (on by default, `SearchTuning.feedback`): the first fusion's best passages move the
query vector toward them (Rocchio: the unit query plus half the mean of the five best passages'
unit vectors) and lend their weightiest words to the BM25 query (RM3, `text_search`); the two
rankings searched again are the ones fused. Filters (`search_filters`) first resolve to the files
they let through, whose passages are then searched exactly.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from adapters.postgres.database import OrgConnection
from adapters.postgres.search_filters import Params, filter_sql
from adapters.postgres.text_search import Bm25, TextRanking, TextScope
from adapters.postgres.vector_indexes import checked_dimensions
from application.ports.chunk_repository import SearchScope
from domain.chunks import SearchResult
from domain.search import Filter, Highlight

DEFAULT_BM25 = Bm25()
ROCCHIO_WEIGHT = 0.5
ROCCHIO_PASSAGES = 5
ROCCHIO_CANDIDATES = 50
"""The first fusion's best passages read for a scope's five (theirs among the best 50)."""

DETAILS = """
    SELECT c.id, c.text, c.page_number, c.knowledge_base_id, f.file_id::text, f.file_name
    FROM chunks c JOIN knowledge_base_files f ON f.id = c.file_record_id
    WHERE c.org_id = $1 AND c.id = ANY($2::bigint[])"""
# The lexemes of words in their knowledge base's language, for the highlights.
LEXEMES = """
    SELECT x.language, x.word,
           ARRAY(SELECT u.lexeme FROM unnest(to_tsvector(
               ('pg_catalog.' || quote_ident(x.language))::regconfig, x.word)) u)
    FROM unnest($1::text[], $2::text[]) AS x(language, word)"""
WORD = re.compile(r"\w+")
FILES_OF = "SELECT id, file_record_id FROM chunks WHERE org_id = $1 AND id = ANY($2::bigint[])"
LANGUAGES = "SELECT id, language FROM knowledge_bases WHERE id = ANY($1::bigint[])"
FILTERED_FILES = """
    SELECT f.id FROM knowledge_base_files f
    WHERE f.org_id = $1 AND f.knowledge_base_id = ANY($2::bigint[]) AND {condition}"""
# The mean of the best passages' unit vectors, for the query's second vector search (Rocchio).
ROCCHIO = """
    SELECT avg(l2_normalize(fb.embedding))::real[] FROM (
        SELECT c.embedding FROM unnest($2::bigint[]) WITH ORDINALITY AS f(id, n)
        JOIN chunks c ON c.id = f.id
        WHERE c.org_id = $1 AND c.knowledge_base_id = ANY($3::bigint[])
          AND c.embedding_model = $4
        ORDER BY f.n LIMIT $5) fb"""


def filtered_statement(dimensions: int) -> str:
    """`exact_statement` over the files of `$6` only (a filtered search: the files the filters
    let through, usually few, searched exactly)."""
    dims = checked_dimensions(dimensions)
    return f"""
        SELECT c.id FROM chunks c
        WHERE c.dimensions = {dims} AND c.org_id = $1
          AND c.knowledge_base_id = ANY($2::bigint[]) AND c.embedding_model = $3
          AND c.file_record_id = ANY($6::bigint[])
        ORDER BY c.embedding <=> $4::vector, c.id
        LIMIT $5"""


@dataclass(frozen=True, slots=True)
class SearchTuning:
    """How the rankings are fused: each ranking's weight in the reciprocal rank fusion and its
    `rrf_k`; BM25's parameters; whether the second, feedback round runs; whether each file's
    best passage comes before any file's second (`diversify`)."""

    vector_weight: float = 1.0
    text_weight: float = 1.0
    rrf_k: int = 60
    bm25: Bm25 = DEFAULT_BM25
    feedback: bool = True
    diversify: bool = True


Nearest = Callable[[str, SearchScope, int], Awaitable[list[int]]]


class HybridSearch:
    """One search over one organization's connection (`PgChunkRepository.search`)."""

    def __init__(self, db: OrgConnection, nearest: Nearest, tuning: SearchTuning) -> None:
        self._db = db
        self.nearest = nearest
        self.tuning = tuning

    async def search(
        self,
        org_id: str,
        *,
        query: str,
        scopes: Sequence[SearchScope],
        top_k: int,
        filters: Filter | None = None,
    ) -> list[SearchResult]:
        """Vector and BM25 rankings fused by weighted reciprocal rank; with feedback (the
        default), both searched again from what the first fusion found (Rocchio for the vector,
        RM3 for the words) and those second rankings fused."""
        tuning = self.tuning
        depth = max(top_k * 4, 40)
        kb_ids = [kb for scope in scopes for kb in scope.knowledge_base_ids]
        files = None
        if filters is not None:
            files = await self._filtered_files(org_id, kb_ids, filters)
            if not files:
                return []
        languages = await self._languages(scopes)
        texts = [
            TextRanking(self._db, org_id, text_scope, tuning.bm25)
            for text_scope in self._text_scopes(scopes, languages, files)
        ]
        dense = [await self._nearest(org_id, scope, depth, files) for scope in scopes]
        words = [await text.rank(query, depth) for text in texts] if query.strip() else []
        fused = self._fuse(dense, words)
        if tuning.feedback and fused:
            dense = [
                await self._nearest(org_id, await self._rocchio(org_id, scope, fused), depth, files)
                for scope in scopes
            ]
            words = [await text.expanded(depth) for text in texts if text.scores]
            fused = self._fuse(dense, words)
        if tuning.diversify:
            fused = await self._diversified(org_id, fused[:depth])
        best = fused[:top_k]
        if not best:
            return []
        rows = await self._db.fetch(DETAILS, org_id, [chunk_id for chunk_id, _ in best])
        details = {row[0]: row for row in rows}
        marks = await self._highlights(
            {row[0]: (row[1], languages.get(row[3], "")) for row in rows}, texts
        )
        return [
            SearchResult(
                chunk_id=chunk_id,
                text=details[chunk_id][1],
                page_number=details[chunk_id][2],
                knowledge_base_id=details[chunk_id][3],
                file_id=details[chunk_id][4],
                file_name=details[chunk_id][5],
                score=round(score, 6),
                highlights=marks.get(chunk_id, ()),
            )
            for chunk_id, score in best
            if chunk_id in details
        ]

    async def _diversified(
        self, org_id: str, fused: list[tuple[int, float]]
    ) -> list[tuple[int, float]]:
        """`fused` with each file's best passage first, in their order, then the files' further
        passages, in theirs: a long file's neighbouring passages do not push other files out of
        the first places."""
        rows = await self._db.fetch(FILES_OF, org_id, [chunk_id for chunk_id, _ in fused])
        file_of = {int(r[0]): int(r[1]) for r in rows}
        seen: set[int] = set()
        first: list[tuple[int, float]] = []
        rest: list[tuple[int, float]] = []
        for item in fused:
            file = file_of.get(item[0], -item[0])
            (rest if file in seen else first).append(item)
            seen.add(file)
        return first + rest

    def _fuse(
        self, dense: Sequence[Sequence[int]], words: Sequence[Sequence[int]]
    ) -> list[tuple[int, float]]:
        """Weighted reciprocal rank fusion: each ranking adds weight / (k + rank)."""
        tuning = self.tuning
        scores: dict[int, float] = {}
        weighted = [(r, tuning.vector_weight) for r in dense]
        weighted += [(r, tuning.text_weight) for r in words]
        for ranking, weight in weighted:
            for rank, chunk_id in enumerate(ranking, start=1):
                scores[chunk_id] = scores.get(chunk_id, 0.0) + weight / (tuning.rrf_k + rank)
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))

    async def _nearest(
        self, org_id: str, scope: SearchScope, limit: int, files: list[int] | None
    ) -> list[int]:
        if files is None:
            return await self.nearest(org_id, scope, limit)
        rows = await self._db.fetch(
            filtered_statement(scope.dimensions),
            org_id,
            scope.knowledge_base_ids,
            scope.embedding_model,
            scope.query_vector,
            limit,
            files,
        )
        return _ids(rows)

    async def _rocchio(
        self, org_id: str, scope: SearchScope, fused: Sequence[tuple[int, float]]
    ) -> SearchScope:
        """The scope with its query vector moved toward its best passages: the unit query plus
        half the mean of the first fusion's five best passages' unit vectors (of this scope)."""
        rows = await self._db.fetch(
            ROCCHIO,
            org_id,
            [chunk_id for chunk_id, _ in fused[:ROCCHIO_CANDIDATES]],
            scope.knowledge_base_ids,
            scope.embedding_model,
            ROCCHIO_PASSAGES,
        )
        mean = rows[0][0] if rows else None
        norm = math.sqrt(sum(x * x for x in scope.query_vector))
        if mean is None or not norm:
            return scope
        vector = [
            q / norm + ROCCHIO_WEIGHT * m for q, m in zip(scope.query_vector, mean, strict=True)
        ]
        return SearchScope(
            knowledge_base_ids=scope.knowledge_base_ids,
            embedding_model=scope.embedding_model,
            dimensions=scope.dimensions,
            query_vector=vector,
        )

    async def _languages(self, scopes: Sequence[SearchScope]) -> dict[int, str]:
        ids = [kb for scope in scopes for kb in scope.knowledge_base_ids]
        return {int(r[0]): str(r[1]) for r in await self._db.fetch(LANGUAGES, ids)}

    @staticmethod
    def _text_scopes(
        scopes: Sequence[SearchScope], languages: dict[int, str], files: list[int] | None
    ) -> list[TextScope]:
        """The scopes' knowledge bases grouped by language (one full-text query each)."""
        grouped: dict[str, TextScope] = {}
        for scope in scopes:
            for kb in scope.knowledge_base_ids:
                language = languages.get(kb)
                if language is None:
                    continue
                text_scope = grouped.setdefault(language, TextScope(language, [], [], files))
                text_scope.knowledge_base_ids.append(kb)
                text_scope.models.append(scope.embedding_model)
        return list(grouped.values())

    async def _highlights(
        self, passages: dict[int, tuple[str, str]], texts: Sequence[TextRanking]
    ) -> dict[int, tuple[Highlight, ...]]:
        """Where the query's own lexemes (not the feedback's) stand in each passage: its words
        whose lexemes, in its knowledge base's language, are among them. Only words sharing
        their first three letters with one of those lexemes are looked up (stemming keeps them;
        the rest cannot match)."""
        wanted = {text.language: set(text.weights) for text in texts}
        spans: dict[int, list[tuple[int, int, str]]] = {}
        words: set[tuple[str, str]] = set()
        # Set lookups only: this loop meets every word of every result.
        prefixes = {
            language: ({t[:3] for t in lexemes if len(t) >= 3}, {t for t in lexemes if len(t) < 3})
            for language, lexemes in wanted.items()
        }
        for chunk_id, (passage, language) in passages.items():
            long, short = prefixes.get(language, (set(), set()))
            for match in WORD.finditer(passage):
                word = match.group().lower()
                if word[:3] in long or (short and (word[:1] in short or word[:2] in short)):
                    spans.setdefault(chunk_id, []).append((match.start(), match.end(), word))
                    words.add((language, word))
        if not words:
            return {}
        pairs = sorted(words)
        rows = await self._db.fetch(
            LEXEMES, [language for language, _ in pairs], [word for _, word in pairs]
        )
        hits = {(r[0], r[1]) for r in rows if wanted.get(r[0], set()) & set(r[2])}
        return {
            chunk_id: tuple(
                Highlight(start, end)
                for start, end, word in found
                if (passages[chunk_id][1], word) in hits
            )
            for chunk_id, found in spans.items()
        }

    async def _filtered_files(self, org_id: str, kb_ids: list[int], filters: Filter) -> list[int]:
        params = Params(3)
        condition = filter_sql(filters, params)
        rows = await self._db.fetch(
            FILTERED_FILES.format(condition=condition), org_id, kb_ids, *params.values
        )
        return _ids(rows)


def _ids(rows: Sequence[object]) -> list[int]:
    return [int(r[0]) for r in rows]  # type: ignore[index]
