// Asks before a hand-off link (#access_token=…) replaces the person already signed in.
import { useSyncExternalStore } from 'react'
import { Dialog } from '../ui/Dialog'
import { decodeClaims } from './claims'
import { acceptHandoff, declineHandoff, getPendingHandoff, subscribePendingHandoff } from './session'
import { useAuth } from './useAuth'

export function usePendingHandoff(): string | null {
  return useSyncExternalStore(subscribePendingHandoff, getPendingHandoff, getPendingHandoff)
}

export function HandoffPrompt({ token }: { token: string }) {
  const { claims: current } = useAuth()
  const next = decodeClaims(token)
  const nextUser = next?.sub ?? 'an unknown user'
  const nextOrg = next?.orgId ?? 'no organization'
  const currentUser = current?.sub ?? 'the current user'
  return (
    <Dialog title={`Switch to ${nextUser} of ${nextOrg}?`} open onClose={declineHandoff}>
      <p>
        A sign-in link would sign you in as {nextUser} of {nextOrg}. You are signed in as {currentUser}
        {current?.orgId ? ` of ${current.orgId}` : ''}.
      </p>
      <div className="form-buttons">
        <button type="button" onClick={declineHandoff} data-autofocus>
          Stay signed in as {currentUser}
        </button>
        <button type="button" className="button-primary" onClick={acceptHandoff}>
          Switch
        </button>
      </div>
    </Dialog>
  )
}
