// The search box over one or several knowledge bases (POST /kb/search) and its results;
// a result opens FilePreview at its page.
import { useId, useState, type FormEvent, type ReactNode } from 'react'
import { useMutation } from '@tanstack/react-query'
import { ErrorNote } from '../ui/ErrorNote'
import { searchKnowledgeBases } from './api'
import { FilePreview } from './FilePreview'
import type { SearchResult } from './types'
import './knowledge.css'

const TOP_K_CHOICES = [5, 8, 10, 20, 50]

interface Preview {
  kbId: number
  fileId: string
  fileName: string
  page: number | null
}

/** Character ranges to mark: the server's `highlights` when present (in code points, as
 * Python counts them; `Passage` slices the text by code point too). */
function highlightRanges(result: SearchResult, length: number): [number, number][] {
  const raw = result.highlights
  if (!Array.isArray(raw)) return []
  const ranges: [number, number][] = []
  for (const h of raw as unknown[]) {
    if (Array.isArray(h) && typeof h[0] === 'number' && typeof h[1] === 'number') {
      ranges.push([h[0], h[1]])
    } else if (h && typeof h === 'object') {
      const { start, end } = h as { start?: unknown; end?: unknown }
      if (typeof start === 'number' && typeof end === 'number') ranges.push([start, end])
    }
  }
  return ranges
    .filter(([s, e]) => s >= 0 && e > s && e <= length)
    .sort((a, b) => a[0] - b[0])
}

function Passage({ result }: { result: SearchResult }) {
  const chars = Array.from(result.text)
  const ranges = highlightRanges(result, chars.length)
  const parts: ReactNode[] = []
  let at = 0
  for (const [start, end] of ranges) {
    if (start < at) continue
    if (start > at) parts.push(chars.slice(at, start).join(''))
    parts.push(<mark key={start}>{chars.slice(start, end).join('')}</mark>)
    at = end
  }
  if (at < chars.length) parts.push(chars.slice(at).join(''))
  return <p className="kb-result-text">{parts}</p>
}

export function SearchPanel(props: {
  /** The knowledge bases searched; empty disables the search with `emptyHint`. */
  kbIds: number[]
  /** Names by id, shown on results when several knowledge bases are searched. */
  kbNames?: Map<number, string>
  scopeText: string
  emptyHint?: string
}) {
  const { kbIds, kbNames, scopeText, emptyHint } = props
  const [query, setQuery] = useState('')
  const [topK, setTopK] = useState(8)
  const [preview, setPreview] = useState<Preview | null>(null)
  const queryId = useId()
  const topKId = useId()
  const scopeId = useId()

  const search = useMutation({
    mutationFn: (vars: { kbIds: number[]; query: string; topK: number }) =>
      searchKnowledgeBases(vars.kbIds, vars.query, vars.topK),
  })

  function submit(event: FormEvent) {
    event.preventDefault()
    const q = query.trim()
    if (!q || kbIds.length === 0) return
    search.mutate({ kbIds, query: q, topK })
  }

  const results = search.data?.results
  const several = (search.variables?.kbIds.length ?? 0) > 1
  let statusText = ''
  if (search.isPending) statusText = 'Searching…'
  else if (results) {
    statusText =
      results.length === 0
        ? `No passages found for “${search.variables?.query ?? ''}”.`
        : `${results.length} passage${results.length === 1 ? '' : 's'} found for “${search.variables?.query ?? ''}”.`
  }

  return (
    <div className="kb-search">
      <form className="kb-search-form" role="search" onSubmit={submit}>
        <div className="kb-field kb-search-query">
          <label htmlFor={queryId}>Search</label>
          <input
            id={queryId}
            type="search"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            maxLength={2000}
            placeholder="Ask about the documents…"
            aria-describedby={scopeId}
            autoComplete="off"
          />
        </div>
        <div className="kb-field kb-search-topk">
          <label htmlFor={topKId}>Results</label>
          <select id={topKId} value={topK} onChange={(e) => setTopK(Number(e.target.value))}>
            {TOP_K_CHOICES.map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        </div>
        <button
          type="submit"
          className="kb-btn kb-btn-primary"
          disabled={search.isPending || kbIds.length === 0 || query.trim() === ''}
        >
          Search
        </button>
      </form>
      <p id={scopeId} className="kb-muted kb-search-scope">
        {kbIds.length === 0 && emptyHint ? emptyHint : scopeText}
      </p>
      <p className="visually-hidden" role="status" aria-live="polite">
        {statusText}
      </p>
      <ErrorNote error={search.error} />
      {results && (
        <div className="kb-results">
          <p className="kb-muted" aria-hidden="true">
            {statusText}
          </p>
          {results.length > 0 && (
            <ol className="kb-result-list">
              {results.map((result) => {
                const kbId = result.knowledgeBaseId ?? search.variables?.kbIds[0] ?? 0
                const page = result.pageNumber ?? null
                return (
                  <li key={`${result.fileId}-${result.chunkId}`} className="kb-result" data-result-file={result.fileName}>
                    <div className="kb-result-head">
                      <button
                        type="button"
                        className="kb-link-button"
                        onClick={() =>
                          setPreview({ kbId, fileId: result.fileId, fileName: result.fileName, page })
                        }
                      >
                        {result.fileName}
                        {page !== null && `, page ${page}`}
                      </button>
                      <span className="kb-result-meta">
                        {several && kbNames?.get(kbId) && <span>{kbNames.get(kbId)} · </span>}
                        <span>score {result.score.toFixed(3)}</span>
                      </span>
                    </div>
                    <Passage result={result} />
                  </li>
                )
              })}
            </ol>
          )}
        </div>
      )}
      {preview && (
        <FilePreview
          kbId={preview.kbId}
          fileId={preview.fileId}
          fileName={preview.fileName}
          page={preview.page}
          onClose={() => setPreview(null)}
        />
      )}
    </div>
  )
}
