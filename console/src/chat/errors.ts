import { ApiError, errorFromBody } from '../api/client'

interface CapDetail {
  period?: unknown
  cap?: unknown
  spent?: unknown
}

function money(value: unknown): string {
  return typeof value === 'number' ? value.toFixed(2) : String(value ?? '?')
}

/** The SDK reports a refused request as an Error whose message is the body: read it back. */
export function asApiError(error: unknown): ApiError | null {
  if (error instanceof ApiError) return error
  if (error instanceof Error && error.message.trim().startsWith('{')) {
    try {
      const body = JSON.parse(error.message) as unknown
      if (body && typeof body === 'object' && 'error' in body) {
        const status = (body as { error?: unknown }).error === 'Spend cap reached' ? 402 : 400
        return errorFromBody(status, body)
      }
    } catch {
      return null
    }
  }
  return null
}

/** A plain sentence for a chat failure; a spend cap names each exceeded period. */
export function chatErrorMessage(error: unknown): string {
  const apiError = asApiError(error)
  if (apiError) {
    if (apiError.message === 'Spend cap reached' && Array.isArray(apiError.details)) {
      const caps = (apiError.details as CapDetail[])
        .map((d) => `${String(d.period ?? 'period')} cap ${money(d.cap)}, spent ${money(d.spent)}`)
        .join('; ')
      return caps ? `Spend cap reached: ${caps}` : 'Spend cap reached'
    }
    return apiError.message
  }
  if (error instanceof Error && error.message) return error.message
  return 'The answer failed.'
}
