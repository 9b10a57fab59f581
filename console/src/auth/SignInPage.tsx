import { useEffect, useId, useState } from 'react'
import { useQuery } from '@tanstack/react-query'
import { Navigate, useLocation, useNavigate } from 'react-router'
import { ErrorNote } from '../ui/ErrorNote'
import { loadConfig } from './config'
import { devSignIn, oidcSignIn, type DevChoice } from './session'
import { useAuth } from './useAuth'

function returnPath(state: unknown): string {
  const from = (state as { from?: string } | null)?.from
  return typeof from === 'string' && from.startsWith('/') && !from.startsWith('//') && !from.startsWith('/sign-in') ? from : '/'
}

function DevelopmentForm({ onDone }: { onDone: () => void }) {
  const [choice, setChoice] = useState<DevChoice>({ userId: 'user_ada', orgId: 'org_demo', role: 'admin', email: '' })
  const [error, setError] = useState<unknown>(null)
  const [pending, setPending] = useState(false)
  const ids = { user: useId(), org: useId(), role: useId(), email: useId() }
  return (
    <form
      className="form"
      onSubmit={(event) => {
        event.preventDefault()
        setPending(true)
        setError(null)
        devSignIn({ ...choice, email: choice.email?.trim() || undefined })
          .then(onDone)
          .catch((err: unknown) => setError(err))
          .finally(() => setPending(false))
      }}
    >
      <p className="hint">Development sign-in: choose who you are. The service mints a token for that user.</p>
      <label htmlFor={ids.user}>User id</label>
      <input
        id={ids.user}
        value={choice.userId}
        autoComplete="username"
        onChange={(event) => setChoice({ ...choice, userId: event.target.value })}
      />
      <label htmlFor={ids.org}>Organization id</label>
      <input id={ids.org} value={choice.orgId} onChange={(event) => setChoice({ ...choice, orgId: event.target.value })} />
      <label htmlFor={ids.role}>Role</label>
      <select
        id={ids.role}
        value={choice.role}
        onChange={(event) => setChoice({ ...choice, role: event.target.value === 'member' ? 'member' : 'admin' })}
      >
        <option value="admin">admin</option>
        <option value="member">member</option>
      </select>
      <label htmlFor={ids.email}>E-mail (optional)</label>
      <input
        id={ids.email}
        type="email"
        value={choice.email ?? ''}
        autoComplete="email"
        onChange={(event) => setChoice({ ...choice, email: event.target.value })}
      />
      <ErrorNote error={error} />
      <div className="form-buttons">
        <button type="submit" className="button-primary" disabled={pending}>
          {pending ? 'Signing in…' : 'Sign in'}
        </button>
      </div>
    </form>
  )
}

function OidcSignIn({ returnTo }: { returnTo: string }) {
  const [error, setError] = useState<unknown>(null)
  const [pending, setPending] = useState(false)
  return (
    <div className="form">
      <p className="hint">Sign in with your organization&apos;s identity provider.</p>
      <ErrorNote error={error} />
      <div className="form-buttons">
        <button
          type="button"
          className="button-primary"
          disabled={pending}
          onClick={() => {
            setPending(true)
            oidcSignIn(returnTo).catch((err: unknown) => {
              setError(err)
              setPending(false)
            })
          }}
        >
          Sign in
        </button>
      </div>
    </div>
  )
}

export function SignInPage() {
  const { token } = useAuth()
  const location = useLocation()
  const navigate = useNavigate()
  const returnTo = returnPath(location.state)
  const config = useQuery({ queryKey: ['consoleConfig'], queryFn: loadConfig, staleTime: Infinity })

  useEffect(() => {
    document.title = 'Sign in · Agent Platform'
    return () => {
      document.title = 'Agent Platform'
    }
  }, [])

  if (token) return <Navigate to={returnTo} replace />

  return (
    <main id="main" className="sign-in">
      <div className="sign-in-card">
        <h1>Sign in to Agent Platform</h1>
        {config.isLoading && <p role="status">Loading…</p>}
        {config.error ? <ErrorNote error={config.error} /> : null}
        {config.data?.identityProvider === 'development' && (
          <DevelopmentForm onDone={() => void navigate(returnTo, { replace: true })} />
        )}
        {config.data?.identityProvider === 'oidc' && <OidcSignIn returnTo={returnTo} />}
        {config.data?.identityProvider === 'external' && (
          <p className="note">
            Open the console from your identity provider&apos;s portal: it signs you in here with a link. This
            console cannot sign you in by itself.
          </p>
        )}
      </div>
    </main>
  )
}
