"""The full-text half of search: BM25 over PostgreSQL's stemmed `tsvector`s, with relevance
feedback.

A passage's `tsv` and `term_count` are written in its knowledge base's language (migration
0022). A query is turned into the lexemes of that language (`to_tsvector`: stemmed, stop words
dropped), and a passage holding any of them (its postings in `chunk_terms`, the inverted index
migration 0022 keeps, read by index-only scans) scores by Okapi BM25:

    score = sum over the query's lexemes t of
            w(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))

with `w(t) = qtf(t) * idf(t)`, `idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`; N, df and avgdl
are counted over the passages searched (the knowledge bases' current model, and the files the
filters let through), so a term's weight is the corpus's own.

Postgres reads each lexeme's postings in the scope as arrays (one row a lexeme); the scores
are summed here, with numpy: the executor's cost per posting, to join a posting to its weight
and sum it, was most of a search's time (BENCHMARKS.md, "Retrieval quality").

Relevance feedback (RM3, with the usual parameters): the words that weigh most in the first
ranking's best passages (each passage's share of the word, weighted by its score) are added to
the query, the original terms keeping half the weight; the second ranking is the one fused. The
original lexemes' postings are kept from the first ranking; only the added words' are read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapters.postgres.database import OrgConnection

FEEDBACK_PASSAGES = 10
FEEDBACK_TERMS = 10
FEEDBACK_CANDIDATES = 30
ORIGINAL_WEIGHT = 0.5

SCOPE = """c.org_id = $1
      AND (c.knowledge_base_id, c.embedding_model) IN (
          SELECT * FROM unnest($2::bigint[], $3::text[]))
      AND ($4::bigint[] IS NULL OR c.file_record_id = ANY($4::bigint[]))"""
# The postings of the scope: its knowledge bases (each with its current model) and files.
POSTINGS = """t.org_id = $1 AND t.knowledge_base_id = ANY($2::bigint[])
      AND t.embedding_model = ($3::text[])[array_position($2::bigint[], t.knowledge_base_id)]
      AND ($4::bigint[] IS NULL OR t.file_record_id = ANY($4::bigint[]))
      AND t.lexeme = ANY($5::text[])"""
# BM25's N (the totals kept per knowledge base, or the filtered files' passage counts) and
# average length (from a sample, which it does not need exact).
STATISTICS = f"""
    SELECT CASE WHEN $4::bigint[] IS NULL
                THEN (SELECT coalesce(sum(s.chunk_count), 0) FROM knowledge_base_stats s
                      WHERE s.knowledge_base_id = ANY($2::bigint[]))
                ELSE (SELECT coalesce(sum(f.chunk_count), 0) FROM knowledge_base_files f
                      WHERE f.id = ANY($4::bigint[])) END::float8 AS n,
           greatest(coalesce((SELECT avg(sample.term_count)::float8 FROM (
                SELECT c.term_count FROM chunks c WHERE {SCOPE} LIMIT 200) sample), 1), 1)
               AS avgdl"""
# One lexeme's postings as three packed big-endian arrays (passage ids, term counts, lengths):
# read as numpy arrays without a Python object per posting.
PACKED = """string_agg(int8send(t.chunk_id), ''::bytea), string_agg(int4send(t.tf), ''::bytea),
           string_agg(int4send(t.dl), ''::bytea)"""
# Each lexeme's postings in the scope: (lexeme, passage ids, term counts, passage lengths).
POSTING_LISTS = f"""
    SELECT t.lexeme, {PACKED} FROM chunk_terms t WHERE {POSTINGS} GROUP BY t.lexeme"""
# The first ranking's reads in one statement: the query's lexemes in the language `$5` with
# their counts (qtf), N and the average length (the first row), then their posting lists.
FIRST_POSTINGS = f"""
    WITH q AS MATERIALIZED (
        SELECT array_agg(u.lexeme) AS lexemes,
               array_agg(coalesce(cardinality(u.positions), 1)) AS counts
        FROM unnest(to_tsvector(('pg_catalog.' || quote_ident($5))::regconfig, $6)) u)
    SELECT NULL::text, NULL::bytea, NULL::bytea, NULL::bytea, q.lexemes, q.counts, s.n, s.avgdl
    FROM q, ({STATISTICS}) s
    UNION ALL
    SELECT t.lexeme, {PACKED}, NULL, NULL, NULL, NULL
    FROM q, chunk_terms t WHERE {POSTINGS.replace("$5::text[]", "q.lexemes")}
    GROUP BY t.lexeme"""
# The words of the best passages, each with its share of them (RM3's relevance model) and its
# document frequency in the scope (counted unless it is one of `$8`, whose postings are known).
FEEDBACK = f"""
    SELECT f.lexeme, f.share,
           CASE WHEN f.lexeme = ANY($8::text[]) THEN NULL ELSE (
               SELECT count(*) FROM chunk_terms t
               WHERE {POSTINGS.replace("t.lexeme = ANY($5::text[])", "t.lexeme = f.lexeme")})
           END
    FROM (SELECT t.lexeme, sum(w.weight * t.tf::float8 / greatest(t.dl, 1)) AS share
          FROM unnest($5::bigint[], $6::float8[]) AS w(id, weight)
          JOIN chunk_terms t ON t.chunk_id = w.id AND t.org_id = $1
          GROUP BY t.lexeme ORDER BY share DESC, t.lexeme LIMIT $7) f"""


@dataclass(frozen=True, slots=True)
class Bm25:
    """BM25's parameters: `k1` (how fast a term's repetitions stop counting) and `b` (how much
    a passage's length discounts them); the defaults are Anserini's (the reference toolkit's)."""

    k1: float = 0.9
    b: float = 0.4


@dataclass(slots=True)
class TextScope:
    """The passages one language's query searches: knowledge bases with their current model,
    and the files the filters let through (None: all)."""

    language: str
    knowledge_base_ids: list[int]
    models: list[str]
    files: list[int] | None


Postings = tuple[Any, Any]
"""One lexeme's postings: passage ids and their term-frequency factors (numpy arrays)."""


def idf(n: float, df: float) -> float:
    """BM25's inverse document frequency (never negative)."""
    return math.log(1 + (max(n, df) - df + 0.5) / (df + 0.5))


class TextRanking:
    """BM25 rankings of one scope; `rank` then, for feedback, `expanded`."""

    def __init__(self, db: OrgConnection, org_id: str, scope: TextScope, bm25: Bm25) -> None:
        self._db = db
        self._org_id = org_id
        self._scope = scope
        self._bm25 = bm25
        self._total = 0.0
        self._average = 1.0
        self._postings: dict[str, Postings] = {}
        self.weights: dict[str, float] = {}
        self.scores: list[tuple[int, float]] = []

    @property
    def language(self) -> str:
        return self._scope.language

    def _scope_args(self) -> tuple[object, ...]:
        s = self._scope
        return (self._org_id, s.knowledge_base_ids, s.models, s.files)

    async def rank(self, query: str, depth: int) -> list[int]:
        """The passages holding any of the query's lexemes, best first (at most `depth`)."""
        rows = await self._db.fetch(
            FIRST_POSTINGS, *self._scope_args(), self._scope.language, query
        )
        counts: dict[str, int] = {}
        for row in rows:
            if row[0] is None:
                counts = dict(zip(row[4] or [], row[5] or [], strict=True))
                self._total, self._average = float(row[6]), float(row[7])
        self._keep(rows)
        self.weights = {
            lexeme: counts[lexeme] * idf(self._total, len(self._postings[lexeme][0]))
            for lexeme in counts
            if lexeme in self._postings
        }
        self.weights = {lexeme: w for lexeme, w in self.weights.items() if w > 0}
        return self._scored(self.weights, depth)

    async def expanded(self, depth: int) -> list[int]:
        """The ranking again, the query expanded with the words of the first ranking's best
        passages (RM3); the first ranking when there is nothing to add."""
        best = self.scores[:FEEDBACK_PASSAGES]
        total_score = sum(score for _, score in best)
        if not best or total_score <= 0 or not self.weights:
            return [chunk_id for chunk_id, _ in self.scores]
        rows = await self._db.fetch(
            FEEDBACK,
            *self._scope_args(),
            [chunk_id for chunk_id, _ in best],
            [score / total_score for _, score in best],
            FEEDBACK_CANDIDATES,
            list(self._postings),
        )
        n = max(self._total, 1.0)
        frequencies = {
            str(r[0]): float(len(self._postings[r[0]][0]) if r[2] is None else r[2]) for r in rows
        }
        shares = {str(r[0]): float(r[1]) for r in rows if frequencies[r[0]]}
        idfs = {t: idf(n, frequencies[t]) for t in shares}
        chosen = sorted(shares, key=lambda t: (-shares[t] * idfs[t], t))[:FEEDBACK_TERMS]
        chosen_total = sum(shares[t] for t in chosen)
        original_total = sum(self.weights.values())
        weights = {t: ORIGINAL_WEIGHT * w / original_total for t, w in self.weights.items()}
        for term in chosen:
            extra = (1 - ORIGINAL_WEIGHT) * shares[term] / chosen_total * idfs[term]
            weights[term] = weights.get(term, 0.0) + extra
        missing = [t for t in weights if t not in self._postings]
        if missing:
            self._keep(await self._db.fetch(POSTING_LISTS, *self._scope_args(), missing))
        return self._scored(weights, depth)

    def _keep(self, rows: list[Any]) -> None:
        """The posting lists of `rows`, each with its term-frequency factor (BM25's
        `tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`); after N and avgdl are read."""
        k1, b = self._bm25.k1, self._bm25.b
        for row in rows:
            if row[0] is not None:
                tf = np.frombuffer(row[2], dtype=">i4").astype(np.float64)
                dl = np.frombuffer(row[3], dtype=">i4").astype(np.float64)
                factor = tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / self._average))
                self._postings[str(row[0])] = (np.frombuffer(row[1], dtype=">i8"), factor)

    def _scored(self, weights: dict[str, float], depth: int) -> list[int]:
        """Okapi BM25 of the passages holding any of the weighted lexemes, best first (ties
        by id), the first `depth`."""
        ids, parts = [], []
        for lexeme, weight in weights.items():
            postings = self._postings.get(lexeme)
            if postings is not None:
                ids.append(postings[0])
                parts.append(weight * postings[1])
        if not ids:
            self.scores = []
            return []
        passages, where = np.unique(np.concatenate(ids), return_inverse=True)
        sums = np.bincount(where, weights=np.concatenate(parts))
        order = np.lexsort((passages, -sums))[:depth]
        best: list[int] = passages[order].tolist()
        self.scores = list(zip(best, sums[order].tolist(), strict=True))
        return best
