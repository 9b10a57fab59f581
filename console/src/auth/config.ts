// The console's public configuration: which identity provider signs people in.
export type IdentityProviderMode = 'development' | 'oidc' | 'external'

export interface OidcSettings {
  authority: string
  clientId: string
  scope: string
}

export interface ConsoleConfig {
  identityProvider: IdentityProviderMode
  oidc: OidcSettings | null
}

let pending: Promise<ConsoleConfig> | null = null

async function fetchConfig(): Promise<ConsoleConfig> {
  const response = await fetch('/console/config.json', {
    headers: { Accept: 'application/json' },
    credentials: 'omit',
    cache: 'no-store',
  })
  if (!response.ok) throw new Error('Could not load the console configuration.')
  const raw = (await response.json()) as Partial<ConsoleConfig>
  const mode = raw.identityProvider
  const oidc =
    raw.oidc && typeof raw.oidc.authority === 'string' && typeof raw.oidc.clientId === 'string'
      ? { authority: raw.oidc.authority, clientId: raw.oidc.clientId, scope: raw.oidc.scope || 'openid profile' }
      : null
  if (mode === 'development') return { identityProvider: 'development', oidc: null }
  if (mode === 'oidc' && oidc) return { identityProvider: 'oidc', oidc }
  return { identityProvider: 'external', oidc: null }
}

/** The configuration, fetched once (a failure is retried on the next call). */
export function loadConfig(): Promise<ConsoleConfig> {
  if (!pending) {
    pending = fetchConfig().catch((err: unknown) => {
      pending = null
      throw err
    })
  }
  return pending
}
