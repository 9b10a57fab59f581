import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { QueryClientProvider } from '@tanstack/react-query'
import { RouterProvider } from 'react-router/dom'
import { queryClient } from './api/queryClient'
import { HandoffPrompt, usePendingHandoff } from './auth/HandoffPrompt'
import { consumeHandoff, dropExpiredToken, startAuth } from './auth/session'
import { subscribeIdentity } from './auth/store'
import { createRouter } from './router'
import './styles.css'

// The hand-off (#access_token=…) is read and removed before anything else looks at the address.
consumeHandoff()
dropExpiredToken()
startAuth()
// A hand-off link pasted into a tab where the console is open changes only the fragment: no
// reload, so the token is taken (and removed from the address bar) here.
window.addEventListener('hashchange', () => consumeHandoff())

// Whoever signs in next must not see the previous person's cached data (the chat sessions
// and the upload queues clear themselves the same way).
subscribeIdentity(() => queryClient.clear())

// Created after the hand-off so the router starts from the cleaned address.
const router = createRouter()

/** A hand-off link for another identity is confirmed (or not) before the console shows. */
function Root() {
  const handoff = usePendingHandoff()
  return handoff ? <HandoffPrompt token={handoff} /> : <RouterProvider router={router} />
}

createRoot(document.getElementById('root')!).render(
  <StrictMode>
    <QueryClientProvider client={queryClient}>
      <Root />
    </QueryClientProvider>
  </StrictMode>,
)
