import { ApiError } from '../api/client'

interface Detail {
  field?: unknown
  message?: unknown
}

export function errorMessage(error: unknown): string {
  if (error instanceof ApiError) return error.message
  if (error instanceof Error && error.message) return error.message
  if (typeof error === 'string') return error
  return 'Something went wrong.'
}

function detailLines(error: unknown): string[] {
  if (!(error instanceof ApiError) || !Array.isArray(error.details)) return []
  return (error.details as unknown[])
    .map((d) => {
      if (!d || typeof d !== 'object') return null
      const { field, message } = d as Detail
      if (typeof message !== 'string') return null
      return typeof field === 'string' && field ? `${field}: ${message}` : message
    })
    .filter((line): line is string => line !== null)
}

/** Shows an error's message plainly (an ApiError's `error` field, plus field details). */
export function ErrorNote({ error }: { error: unknown }) {
  if (!error) return null
  const lines = detailLines(error)
  return (
    <div className="error-note" role="alert">
      <p>{errorMessage(error)}</p>
      {lines.length > 0 && (
        <ul>
          {lines.map((line, i) => (
            <li key={i}>{line}</li>
          ))}
        </ul>
      )}
    </div>
  )
}
