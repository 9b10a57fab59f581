import { useEffect, useRef, useState } from 'react'
import { Link, useNavigate } from 'react-router'
import { ErrorNote } from '../ui/ErrorNote'
import { oidcCallback } from './session'

/** Where the identity provider sends the browser back with the authorization code. */
export function AuthCallbackPage() {
  const navigate = useNavigate()
  const [error, setError] = useState<unknown>(null)
  const started = useRef(false)
  useEffect(() => {
    if (started.current) return
    started.current = true
    oidcCallback()
      .then((returnTo) => navigate(returnTo, { replace: true }))
      .catch((err: unknown) => setError(err))
  }, [navigate])
  return (
    <main id="main" className="sign-in">
      <div className="sign-in-card">
        <h1>Signing in…</h1>
        {error ? (
          <>
            <ErrorNote error={error} />
            <p>
              <Link to="/sign-in">Back to sign-in</Link>
            </p>
          </>
        ) : (
          <p role="status">Completing the sign-in…</p>
        )}
      </div>
    </main>
  )
}
