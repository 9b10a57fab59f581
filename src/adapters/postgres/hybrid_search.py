"""Hybrid search: the vector rankings (`PgChunkRepository.nearest`, pgvector) and the BM25
rankings (`text_search`) of a query, fused by weighted reciprocal rank, with one round of
relevance feedback, then each passage's details and highlights.

Feedback (on by default, `SearchTuning.feedback`): the first fusion's best passages move the
query vector toward them (Rocchio: the unit query plus half the mean of the five best passages'
unit vectors), which orders the first round's candidates again (one statement, whatever the
knowledge base's size or index), and lend their weightiest words to the BM25 query (RM3,
`text_search`), searched again; those two rankings are the ones fused. Filters
(`search_filters`) first resolve to the files they let through, whose passages are then searched
exactly. The best passages come back with their details, each file's best first, in one
statement.
"""

from __future__ import annotations

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

# The first `$3` of the fused passages `$2` (in order) with their details; with `$4`
# (diversify), each file's best passage before any file's second.
DETAILS = """
    SELECT r.id, r.text, r.page_number, r.knowledge_base_id, r.file_id, r.file_name FROM (
        SELECT c.id, c.text, c.page_number, c.knowledge_base_id, f.file_id::text AS file_id,
               f.file_name, o.n,
               row_number() OVER (PARTITION BY c.file_record_id ORDER BY o.n) AS nth
        FROM unnest($2::bigint[]) WITH ORDINALITY AS o(id, n)
        JOIN chunks c ON c.id = o.id JOIN knowledge_base_files f ON f.id = c.file_record_id
        WHERE c.org_id = $1) r
    ORDER BY $4::boolean AND r.nth > 1, r.n LIMIT $3"""
WORD = re.compile(r"\w+")
LEXEME_CACHE_SIZE = 200_000
_lexemes_of: dict[str, dict[tuple[str, str], frozenset[str]]] = {}
"""Per organization (so that no search's speed tells another organization's words), each
(language, lower-cased word) looked up for highlights, with its lexemes: a language's stemming
never changes, and a knowledge base's vocabulary soon recurs, so most searches need no look-up.
Emptied when full (at most about 40 MB)."""
# The lexemes of words in their knowledge base's language, for the highlights.
LEXEMES = """
    SELECT x.language, x.word,
           ARRAY(SELECT u.lexeme FROM unnest(to_tsvector(
               ('pg_catalog.' || quote_ident(x.language))::regconfig, x.word)) u)
    FROM unnest($1::text[], $2::text[]) AS x(language, word)"""
LANGUAGES = "SELECT id, language FROM knowledge_bases WHERE id = ANY($1::bigint[])"
FILTERED_FILES = """
    SELECT f.id FROM knowledge_base_files f
    WHERE f.org_id = $1 AND f.knowledge_base_id = ANY($2::bigint[]) AND {condition}"""
# Rocchio: the candidates `$8` ordered by their distance to the unit query `$6` plus `$7` times
# the mean unit vector of the scope's first `$5` of the best passages `$2`.
ROCCHIO = """
    WITH fb AS MATERIALIZED (
        SELECT avg(l2_normalize(x.embedding)) AS mean FROM (
            SELECT c.embedding FROM unnest($2::bigint[]) WITH ORDINALITY AS f(id, n)
            JOIN chunks c ON c.id = f.id
            WHERE c.org_id = $1 AND c.knowledge_base_id = ANY($3::bigint[])
              AND c.embedding_model = $4
            ORDER BY f.n LIMIT $5) x),
    q AS MATERIALIZED (
        SELECT coalesce(l2_normalize($6::vector) + fb.mean * array_fill($7::real,
                            ARRAY[vector_dims($6::vector)])::vector,
                        $6::vector) AS v
        FROM fb)
    SELECT c.id FROM q, chunks c
    WHERE c.org_id = $1 AND c.id = ANY($8::bigint[]) AND c.knowledge_base_id = ANY($3::bigint[])
      AND c.embedding_model = $4
    ORDER BY c.embedding <=> q.v, c.id LIMIT $9"""


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
        default), second rankings from what the first ones found (Rocchio from the first fusion
        for the vector, RM3 from the first BM25 ranking for the words) are the ones fused."""
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
        # The words first, both rounds (RM3 reads the first BM25 ranking only): a query vector
        # still being computed is ready by then.
        words = [await text.rank(query, depth) for text in texts] if query.strip() else []
        expanded = [await t.expanded(depth) for t in texts if t.scores] if tuning.feedback else []
        scopes = [await scope.resolved() for scope in scopes]
        dense = [await self._nearest(org_id, scope, depth, files) for scope in scopes]
        fused = self._fuse(dense, words)
        if tuning.feedback and fused:
            candidates = sorted({i for ranking in (*dense, *words) for i in ranking})
            dense = [
                await self._rocchio(org_id, scope, fused, candidates, depth) for scope in scopes
            ]
            fused = self._fuse(dense, expanded)
        if not fused:
            return []
        # Each file's best passage first (diversify): a long file's neighbouring passages do not
        # push other files out of the first places.
        rows = await self._db.fetch(
            DETAILS, org_id, [chunk_id for chunk_id, _ in fused[:depth]], top_k, tuning.diversify
        )
        scores = dict(fused)
        marks = await self._highlights(
            org_id, {row[0]: (row[1], languages.get(row[3], "")) for row in rows}, texts
        )
        return [
            SearchResult(
                chunk_id=row[0],
                text=row[1],
                page_number=row[2],
                knowledge_base_id=row[3],
                file_id=row[4],
                file_name=row[5],
                score=round(scores[row[0]], 6),
                highlights=marks.get(row[0], ()),
            )
            for row in rows
        ]

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
        self,
        org_id: str,
        scope: SearchScope,
        fused: Sequence[tuple[int, float]],
        candidates: list[int],
        depth: int,
    ) -> list[int]:
        """The first round's `candidates` ordered by their distance to the scope's query vector
        moved toward its best passages: the unit query plus half the mean of the first fusion's
        five best passages' unit vectors (of this scope)."""
        rows = await self._db.fetch(
            ROCCHIO,
            org_id,
            [chunk_id for chunk_id, _ in fused[:ROCCHIO_CANDIDATES]],
            scope.knowledge_base_ids,
            scope.embedding_model,
            ROCCHIO_PASSAGES,
            scope.query_vector,
            ROCCHIO_WEIGHT,
            candidates,
            depth,
        )
        return _ids(rows)

    async def _languages(self, scopes: Sequence[SearchScope]) -> dict[int, str]:
        """Each knowledge base's language: as the scopes carry them, else as stored."""
        if all(len(s.languages) == len(s.knowledge_base_ids) for s in scopes):
            return {
                kb: language
                for s in scopes
                for kb, language in zip(s.knowledge_base_ids, s.languages, strict=True)
            }
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
        self, org_id: str, passages: dict[int, tuple[str, str]], texts: Sequence[TextRanking]
    ) -> dict[int, tuple[Highlight, ...]]:
        """Where the query's own lexemes (not the feedback's) stand in each passage: its words
        whose lexemes, in its knowledge base's language, are among them. Only words starting
        with one of those lexemes less its last two letters (at least its first three) are
        looked up: a stemmer keeps a word's beginning and changes at most its last letters
        (studies: studi; hoping: hope), so the rest cannot match."""
        wanted = {text.language: set(text.weights) for text in texts}
        spans: dict[int, list[tuple[int, int, str]]] = {}
        words: set[tuple[str, str]] = set()
        starts = {
            language: {t[: max(3, len(t) - 2)] for t in lexemes if t}
            for language, lexemes in wanted.items()
        }
        for chunk_id, (passage, language) in passages.items():
            for found in _words_starting(passage, starts.get(language, set())):
                spans.setdefault(chunk_id, []).append(found)
                words.add((language, found[2]))
        if not words:
            return {}
        known = _lexemes_of.setdefault(org_id, {})
        unknown = sorted(pair for pair in words if pair not in known)
        if unknown:
            rows = await self._db.fetch(
                LEXEMES, [language for language, _ in unknown], [word for _, word in unknown]
            )
            if sum(map(len, _lexemes_of.values())) + len(rows) > LEXEME_CACHE_SIZE:
                _lexemes_of.clear()
                known = _lexemes_of.setdefault(org_id, {})
            known.update({(r[0], r[1]): frozenset(r[2]) for r in rows})
        hits = {pair for pair in words if wanted[pair[0]] & known.get(pair, frozenset())}
        marks: dict[int, tuple[Highlight, ...]] = {}
        for chunk_id, located in spans.items():
            language = passages[chunk_id][1]
            marks[chunk_id] = tuple(Highlight(s, e) for s, e, w in located if (language, w) in hits)
        return marks

    async def _filtered_files(self, org_id: str, kb_ids: list[int], filters: Filter) -> list[int]:
        params = Params(3)
        condition = filter_sql(filters, params)
        rows = await self._db.fetch(
            FILTERED_FILES.format(condition=condition), org_id, kb_ids, *params.values
        )
        return _ids(rows)


def _words_starting(passage: str, starts: set[str]) -> list[tuple[int, int, str]]:
    """(start, end, lower-cased word) of the passage's words (maximal runs of word characters)
    that begin with one of `starts`, in any case. Found with `str.find`, in C: scanning every
    word of every result in Python was most of a search's own CPU."""
    lower = passage.lower()
    if len(lower) != len(passage):  # a character whose lower case is longer: offsets differ
        return [
            (m.start(), m.end(), m.group().lower())
            for m in WORD.finditer(passage)
            if any(m.group().lower().startswith(s) for s in starts)
        ]
    found: dict[int, tuple[int, int, str]] = {}
    for start in starts:
        at = lower.find(start)
        while at >= 0:
            if at == 0 or not WORD.match(lower, at - 1):
                end = WORD.match(lower, at)
                if end is not None:
                    found[at] = (at, end.end(), end.group())
            at = lower.find(start, at + 1)
    return [found[at] for at in sorted(found)]


def _ids(rows: Sequence[object]) -> list[int]:
    return [int(r[0]) for r in rows]  # type: ignore[index]
