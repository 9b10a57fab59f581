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

Relevance feedback (RM3, with the usual parameters): the words that weigh most in the first
ranking's best passages (each passage's share of the word, weighted by its score) are added to
the query, the original terms keeping half the weight; the second ranking is the one fused.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

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
# The first ranking in one statement: the query's lexemes in the language `$5` with their counts
# (qtf), each lexeme's weight qtf * idf from its document frequency in the scope, and the
# passages' scores. The weights come back too (rows without a passage), with N and the average
# length, for the feedback round. Lexemes and weights travel as arrays, looked up by position:
# joining the postings to them by lexeme cost more than reading the postings twice.
FIRST_RANKING = f"""
    WITH q AS MATERIALIZED (
        SELECT array_agg(u.lexeme) AS lexemes,
               array_agg(coalesce(cardinality(u.positions), 1)::float8) AS counts
        FROM unnest(to_tsvector(('pg_catalog.' || quote_ident($5))::regconfig, $6)) u),
    stats AS MATERIALIZED ({STATISTICS}),
    w AS MATERIALIZED (
        SELECT array_agg(d.lexeme) AS lexemes,
               array_agg(q.counts[array_position(q.lexemes, d.lexeme)]
                         * ln(1 + (greatest(stats.n, d.df) - d.df + 0.5) / (d.df + 0.5)))
                   AS weights
        FROM q, stats, (SELECT t.lexeme, count(*)::float8 AS df FROM q, chunk_terms t
                        WHERE {POSTINGS.replace("$5::text[]", "q.lexemes")}
                        GROUP BY t.lexeme) d),
    ranked AS (
        SELECT t.chunk_id,
               sum(w.weights[array_position(w.lexemes, t.lexeme)] * t.tf * ($7::float8 + 1)
                   / (t.tf + $7::float8 * (1 - $8::float8 + $8::float8 * t.dl / stats.avgdl)))
                   AS score
        FROM w, stats, chunk_terms t
        WHERE {POSTINGS.replace("$5::text[]", "w.lexemes")}
        GROUP BY t.chunk_id ORDER BY score DESC, t.chunk_id LIMIT $9)
    SELECT NULL::bigint, unnest(w.weights), unnest(w.lexemes), stats.n, stats.avgdl FROM w, stats
    UNION ALL
    SELECT ranked.chunk_id, ranked.score, NULL, NULL, NULL FROM ranked"""
SCORED = f"""
    SELECT t.chunk_id,
           sum(($6::float8[])[array_position($5::text[], t.lexeme)] * t.tf * ($7::float8 + 1)
               / (t.tf + $7::float8 * (1 - $8::float8 + $8::float8 * t.dl / $9::float8)))
               AS score
    FROM chunk_terms t WHERE {POSTINGS}
    GROUP BY t.chunk_id ORDER BY score DESC, t.chunk_id LIMIT $10"""
# The words of the best passages, each with its share of them (RM3's relevance model) and its
# document frequency in the scope.
FEEDBACK = f"""
    SELECT f.lexeme, f.share,
           (SELECT count(*) FROM chunk_terms t
            WHERE {POSTINGS.replace("t.lexeme = ANY($5::text[])", "t.lexeme = f.lexeme")})
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


class TextRanking:
    """BM25 rankings of one scope; `rank` then, for feedback, `expanded`."""

    def __init__(self, db: OrgConnection, org_id: str, scope: TextScope, bm25: Bm25) -> None:
        self._db = db
        self._org_id = org_id
        self._scope = scope
        self._bm25 = bm25
        self._total = 0.0
        self._average = 1.0
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
            FIRST_RANKING,
            *self._scope_args(),
            self._scope.language,
            query,
            self._bm25.k1,
            self._bm25.b,
            depth,
        )
        self.weights = {str(r[2]): float(r[1]) for r in rows if r[0] is None and r[1] > 0}
        for row in rows:
            if row[0] is None:
                self._total, self._average = float(row[3]), float(row[4])
                break
        self.scores = [(int(r[0]), float(r[1])) for r in rows if r[0] is not None]
        return [chunk_id for chunk_id, _ in self.scores]

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
        )
        n = max(self._total, 1.0)
        shares = {str(r[0]): float(r[1]) for r in rows if r[2]}
        idf = {
            str(r[0]): math.log(1 + (max(n, r[2]) - r[2] + 0.5) / (r[2] + 0.5))
            for r in rows
            if r[2]
        }
        chosen = sorted(shares, key=lambda t: (-shares[t] * idf[t], t))[:FEEDBACK_TERMS]
        chosen_total = sum(shares[t] for t in chosen)
        original_total = sum(self.weights.values())
        weights = {t: ORIGINAL_WEIGHT * w / original_total for t, w in self.weights.items()}
        for term in chosen:
            extra = (1 - ORIGINAL_WEIGHT) * shares[term] / chosen_total * idf[term]
            weights[term] = weights.get(term, 0.0) + extra
        return await self._scored(weights, depth)

    async def _scored(self, weights: dict[str, float], depth: int) -> list[int]:
        terms = list(weights)
        rows = await self._db.fetch(
            SCORED,
            *self._scope_args(),
            terms,
            [weights[t] for t in terms],
            self._bm25.k1,
            self._bm25.b,
            self._average,
            depth,
        )
        self.scores = [(int(r[0]), float(r[1])) for r in rows]
        return [chunk_id for chunk_id, _ in self.scores]
