// Same-origin JSON API client: adds the bearer token, throws ApiError on non-2xx.
import { getToken, signOut } from '../auth/store'

export class ApiError extends Error {
  status: number
  details?: unknown
  body?: unknown

  constructor(message: string, status: number, details?: unknown, body?: unknown) {
    super(message)
    this.name = 'ApiError'
    this.status = status
    this.details = details
    this.body = body
  }
}

type QueryValue = string | number | boolean | undefined | null

export function authHeaders(): Record<string, string> {
  const token = getToken()
  return token ? { Authorization: `Bearer ${token}` } : {}
}

export function buildUrl(path: string, query?: Record<string, QueryValue>): string {
  if (!query) return path
  const params = new URLSearchParams()
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null || value === '') continue
    params.set(key, String(value))
  }
  const qs = params.toString()
  if (!qs) return path
  return path + (path.includes('?') ? '&' : '?') + qs
}

async function readBody(response: Response): Promise<unknown> {
  const text = await response.text()
  if (!text) return undefined
  try {
    return JSON.parse(text) as unknown
  } catch {
    return text
  }
}

function statusSentence(status: number): string {
  if (status === 401) return 'Your session has ended. Please sign in again.'
  if (status === 403) return 'You do not have access to this.'
  if (status === 404) return 'Not found.'
  if (status >= 500) return 'The service had a problem. Please try again.'
  return `The request failed (HTTP ${status}).`
}

/** Turns an error response into an ApiError (also used for non-OK streaming responses). */
export function errorFromBody(status: number, body: unknown): ApiError {
  if (body && typeof body === 'object' && 'error' in body) {
    const b = body as { error?: unknown; details?: unknown }
    const message = typeof b.error === 'string' && b.error ? b.error : statusSentence(status)
    return new ApiError(message, status, b.details, body)
  }
  return new ApiError(statusSentence(status), status, undefined, body)
}

function handleUnauthorized(status: number): void {
  // The token is dead: forget it so the sign-in page shows.
  if (status === 401 && getToken()) void signOut()
}

export async function api<T>(
  path: string,
  options: {
    method?: string
    query?: Record<string, QueryValue>
    body?: unknown
    signal?: AbortSignal
  } = {},
): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json', ...authHeaders() }
  let body: BodyInit | undefined
  if (options.body !== undefined) {
    headers['Content-Type'] = 'application/json'
    body = JSON.stringify(options.body)
  }
  let response: Response
  try {
    response = await fetch(buildUrl(path, options.query), {
      method: options.method ?? (body ? 'POST' : 'GET'),
      headers,
      body,
      signal: options.signal,
      credentials: 'omit',
    })
  } catch (err) {
    if (err instanceof DOMException && err.name === 'AbortError') throw err
    throw new ApiError('Could not reach the service. Check your connection and try again.', 0)
  }
  const parsed = await readBody(response)
  if (!response.ok) {
    handleUnauthorized(response.status)
    throw errorFromBody(response.status, parsed)
  }
  return parsed as T
}

/** Authenticated GET that follows a redirect (e.g. /kb/files/download's 302) and returns the body. */
export async function apiBlob(
  path: string,
  query?: Record<string, string | number | undefined>,
): Promise<Blob> {
  let response: Response
  try {
    response = await fetch(buildUrl(path, query), {
      headers: authHeaders(),
      redirect: 'follow',
      credentials: 'omit',
    })
  } catch {
    throw new ApiError('Could not reach the service. Check your connection and try again.', 0)
  }
  if (!response.ok) {
    handleUnauthorized(response.status)
    throw errorFromBody(response.status, await readBody(response))
  }
  return response.blob()
}
