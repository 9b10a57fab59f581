// Signing in and staying signed in: the hand-off, the development sign-in with renewal,
// and OpenID Connect (oidc-client-ts, loaded only when that mode is configured).
import type { User, UserManager } from 'oidc-client-ts'
import { ApiError, errorFromBody } from '../api/client'
import { loadConfig, type ConsoleConfig } from './config'
import { decodeClaims } from './claims'
import { getAuthState, identityOf, setSignOutHook, setToken, signOut, subscribeAuth } from './store'

const HANDOFF_PARAM = 'access_token'
const DEV_CHOICE_KEY = 'agentPlatform.console.devChoice'
const RETURN_TO_KEY = 'agentPlatform.console.returnTo'
const RENEW_BEFORE_MS = 2 * 60 * 1000

/** A hand-off token for another identity than the one signed in: waits for the user's word. */
let pendingHandoff: string | null = null
const handoffListeners = new Set<() => void>()

function setPendingHandoff(token: string | null): void {
  pendingHandoff = token
  for (const listener of handoffListeners) listener()
}

export function getPendingHandoff(): string | null {
  return pendingHandoff
}

export function subscribePendingHandoff(listener: () => void): () => void {
  handoffListeners.add(listener)
  return () => {
    handoffListeners.delete(listener)
  }
}

/** Signs in with the waiting hand-off token. */
export function acceptHandoff(): void {
  const token = pendingHandoff
  if (!token) return
  setPendingHandoff(null)
  setToken(token, 'handoff')
}

/** Keeps the current session; the waiting hand-off token is forgotten. */
export function declineHandoff(): void {
  setPendingHandoff(null)
}

/** `/console/#access_token=<token>`: take it out of the address bar and sign in with it. A
 * link must not silently replace someone already signed in as another user or organization
 * (login CSRF): then the token waits for a confirmation (getPendingHandoff). */
export function consumeHandoff(): void {
  const hash = window.location.hash
  if (!hash || hash.length < 2) return
  const params = new URLSearchParams(hash.slice(1))
  const token = params.get(HANDOFF_PARAM)
  if (!token) return
  params.delete(HANDOFF_PARAM)
  params.delete('token_type')
  params.delete('expires_in')
  const rest = params.toString()
  const url = window.location.pathname + window.location.search + (rest ? `#${rest}` : '')
  window.history.replaceState(window.history.state, '', url)
  const current = getAuthState()
  const currentLive = current.token && !(current.claims?.exp && current.claims.exp * 1000 < Date.now())
  if (currentLive && identityOf(current) !== identityOf({ token, source: 'handoff', claims: decodeClaims(token) })) {
    setPendingHandoff(token)
    return
  }
  setToken(token, 'handoff')
}

/** Forget a stored token that has already expired (the API would refuse it anyway). */
export function dropExpiredToken(): void {
  const { claims, token } = getAuthState()
  if (token && claims?.exp && claims.exp * 1000 < Date.now()) void signOut()
}

// ---- development identity provider ----

export interface DevChoice {
  userId: string
  orgId: string
  role: 'admin' | 'member'
  email?: string
}

interface SignInResponse {
  token: string
  expiresAt: string
}

let renewTimer: number | undefined

function rememberedChoice(): DevChoice | null {
  try {
    const raw = window.sessionStorage.getItem(DEV_CHOICE_KEY)
    return raw ? (JSON.parse(raw) as DevChoice) : null
  } catch {
    return null
  }
}

function scheduleRenewal(expiresAt: number): void {
  window.clearTimeout(renewTimer)
  const delay = Math.max(expiresAt - Date.now() - RENEW_BEFORE_MS, 5_000)
  renewTimer = window.setTimeout(() => {
    const choice = rememberedChoice()
    if (!choice || getAuthState().source !== 'development') return
    devSignIn(choice).catch((err: unknown) => {
      // A refusal ends the session; a network blip tries again shortly.
      if (err instanceof ApiError && err.status >= 400 && err.status < 500) void signOut()
      else scheduleRenewal(Date.now() + RENEW_BEFORE_MS + 15_000)
    })
  }, delay)
}

export async function devSignIn(choice: DevChoice): Promise<void> {
  const body: DevChoice = { userId: choice.userId, orgId: choice.orgId, role: choice.role }
  if (choice.email) body.email = choice.email
  let response: Response
  try {
    response = await fetch('/console/sign-in', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json' },
      body: JSON.stringify(body),
      credentials: 'omit',
    })
  } catch {
    throw new ApiError('Could not reach the service. Check your connection and try again.', 0)
  }
  const text = await response.text()
  let parsed: unknown
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = text
  }
  if (!response.ok) throw errorFromBody(response.status, parsed)
  const result = parsed as SignInResponse
  if (!result || typeof result.token !== 'string') throw new ApiError('The sign-in answer had no token.', response.status)
  try {
    window.sessionStorage.setItem(DEV_CHOICE_KEY, JSON.stringify(body))
  } catch {
    // renewal then needs a new sign-in
  }
  setToken(result.token, 'development')
  const expires = Date.parse(result.expiresAt)
  if (!Number.isNaN(expires)) scheduleRenewal(expires)
}

function resumeDevRenewal(): void {
  const { source, claims } = getAuthState()
  if (source === 'development' && claims?.exp) scheduleRenewal(claims.exp * 1000)
}

// ---- OpenID Connect ----

let managerPromise: Promise<UserManager> | null = null

function oidcManager(config: ConsoleConfig): Promise<UserManager> {
  if (!managerPromise) {
    managerPromise = import('oidc-client-ts').then(({ UserManager, WebStorageStateStore }) => {
      const oidc = config.oidc!
      const origin = window.location.origin
      const manager = new UserManager({
        authority: oidc.authority,
        client_id: oidc.clientId,
        redirect_uri: `${origin}/console/auth/callback`,
        post_logout_redirect_uri: `${origin}/console/`,
        response_type: 'code',
        scope: oidc.scope,
        userStore: new WebStorageStateStore({ store: window.sessionStorage }),
        // The sign-in's state (with the PKCE verifier) stays with the tab, as the tokens do.
        stateStore: new WebStorageStateStore({ store: window.sessionStorage }),
        automaticSilentRenew: true,
        // Renew this long before expiry: the library's 60 s would renew every second when a
        // provider's access tokens live a minute or less.
        accessTokenExpiringNotificationTimeInSeconds: 10,
      })
      const adopt = (user: User | null) => {
        if (user && !user.expired && user.access_token) setToken(user.access_token, 'oidc')
      }
      manager.events.addUserLoaded(adopt)
      manager.events.addUserSignedOut(() => {
        void manager.removeUser()
        if (getAuthState().source === 'oidc') void signOut()
      })
      manager.events.addAccessTokenExpired(() => {
        if (getAuthState().source === 'oidc') void signOut()
      })
      setSignOutHook(async (redirect: boolean) => {
        if (!redirect) {
          await manager.removeUser()
          return
        }
        let endSession: string | undefined
        try {
          endSession = await manager.metadataService.getEndSessionEndpoint()
        } catch {
          endSession = undefined
        }
        if (endSession) await manager.signoutRedirect()
        else await manager.removeUser()
      })
      return manager
    })
  }
  return managerPromise
}

export async function oidcSignIn(returnTo: string): Promise<void> {
  const config = await loadConfig()
  if (config.identityProvider !== 'oidc') throw new Error('OpenID Connect is not configured.')
  try {
    window.sessionStorage.setItem(RETURN_TO_KEY, returnTo)
  } catch {
    // back to the start page then
  }
  const manager = await oidcManager(config)
  await manager.signinRedirect()
}

/** Completes the authorization code flow; answers where to go next (inside the console). */
export async function oidcCallback(): Promise<string> {
  const config = await loadConfig()
  if (config.identityProvider !== 'oidc') throw new Error('OpenID Connect is not configured.')
  const manager = await oidcManager(config)
  const user = await manager.signinRedirectCallback()
  setToken(user.access_token, 'oidc')
  let returnTo = '/'
  try {
    returnTo = window.sessionStorage.getItem(RETURN_TO_KEY) || '/'
    window.sessionStorage.removeItem(RETURN_TO_KEY)
  } catch {
    // start page
  }
  return returnTo.startsWith('/') && !returnTo.startsWith('//') ? returnTo : '/'
}

let started = false

/** Starts the background parts: development renewal, OIDC user restore and silent renewal. */
export function startAuth(): void {
  if (started) return
  started = true
  resumeDevRenewal()
  subscribeAuth(() => {
    if (!getAuthState().token) window.clearTimeout(renewTimer)
  })
  loadConfig()
    .then(async (config) => {
      if (config.identityProvider !== 'oidc') return
      const manager = await oidcManager(config)
      if (window.location.pathname.startsWith('/console/auth/callback')) return
      const user = await manager.getUser()
      const state = getAuthState()
      if (user && !user.expired && (!state.token || state.source === 'oidc')) setToken(user.access_token, 'oidc')
    })
    .catch(() => {
      // the sign-in page reports a configuration it cannot load
    })
}
