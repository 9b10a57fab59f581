// The auth store: the bearer token in memory, mirrored to sessionStorage (never a cookie).
import { decodeClaims, type TokenClaims } from './claims'

export type TokenSource = 'development' | 'oidc' | 'handoff'

export interface AuthState {
  token: string | null
  source: TokenSource | null
  claims: TokenClaims | null
}

const STORAGE_KEY = 'agentPlatform.console.token'
const SOURCE_KEY = 'agentPlatform.console.tokenSource'

function readStored(): AuthState {
  try {
    const token = window.sessionStorage.getItem(STORAGE_KEY)
    const source = window.sessionStorage.getItem(SOURCE_KEY) as TokenSource | null
    if (token) return { token, source, claims: decodeClaims(token) }
  } catch {
    // sessionStorage unavailable: memory only
  }
  return { token: null, source: null, claims: null }
}

let state: AuthState = readStored()
const listeners = new Set<() => void>()
const identityListeners = new Set<() => void>()
let signOutHook: ((redirect: boolean) => void | Promise<void>) | null = null

/** Who is signed in ('' when nobody): the user and the organization of the token. */
export function identityOf(s: AuthState): string {
  return s.token ? `${s.claims?.sub ?? ''}|${s.claims?.orgId ?? ''}` : ''
}

let lastIdentity = identityOf(state)

function emit() {
  const identity = identityOf(state)
  if (identity !== lastIdentity) {
    lastIdentity = identity
    // What the previous person left in memory goes before anything renders for the next one.
    for (const listener of identityListeners) listener()
  }
  for (const listener of listeners) listener()
}

export function getAuthState(): AuthState {
  return state
}

export function getToken(): string | null {
  return state.token
}

export function subscribeAuth(listener: () => void): () => void {
  listeners.add(listener)
  return () => {
    listeners.delete(listener)
  }
}

/** Called when the signed-in identity changes (another user or organization, or signed out). */
export function subscribeIdentity(listener: () => void): () => void {
  identityListeners.add(listener)
  return () => {
    identityListeners.delete(listener)
  }
}

export function setToken(token: string, source: TokenSource): void {
  state = { token, source, claims: decodeClaims(token) }
  try {
    window.sessionStorage.setItem(STORAGE_KEY, token)
    window.sessionStorage.setItem(SOURCE_KEY, source)
  } catch {
    // memory only
  }
  emit()
}

function clearToken(): void {
  state = { token: null, source: null, claims: null }
  try {
    window.sessionStorage.removeItem(STORAGE_KEY)
    window.sessionStorage.removeItem(SOURCE_KEY)
  } catch {
    // nothing stored
  }
  emit()
}

/** Registers what signing out must also do for the current identity provider (OIDC). */
export function setSignOutHook(hook: ((redirect: boolean) => void | Promise<void>) | null): void {
  signOutHook = hook
}

/** Forgets the token. `redirect` lets the identity provider end its session too. */
export async function signOut(options: { redirect?: boolean } = {}): Promise<void> {
  const hook = signOutHook
  const wasOidc = state.source === 'oidc'
  clearToken()
  if (hook && wasOidc) {
    try {
      await hook(Boolean(options.redirect))
    } catch {
      // the local session is gone either way
    }
  }
}
