import { lazy, Suspense, type ReactNode } from 'react'
import { createBrowserRouter } from 'react-router'
import { AuthCallbackPage } from './auth/AuthCallbackPage'
import { RequireAuth } from './auth/RequireAuth'
import { SignInPage } from './auth/SignInPage'
import { Layout } from './layout/Layout'
import { NotFoundPage } from './layout/NotFoundPage'
import { RouteError } from './ui/RouteError'

const ChatPage = lazy(() => import('./chat/ChatPage'))
const KnowledgeBasesPage = lazy(() => import('./knowledge').then((m) => ({ default: m.KnowledgeBasesPage })))
const KnowledgeBasePage = lazy(() => import('./knowledge').then((m) => ({ default: m.KnowledgeBasePage })))

function Page({ children }: { children: ReactNode }) {
  return (
    <Suspense
      fallback={
        <p className="loading" role="status">
          Loading…
        </p>
      }
    >
      {children}
    </Suspense>
  )
}

function NewChatRoute() {
  return (
    <Page>
      <ChatPage />
    </Page>
  )
}

export function createRouter() {
  return createBrowserRouter(
  [
    { path: '/sign-in', element: <SignInPage />, errorElement: <RouteError /> },
    { path: '/auth/callback', element: <AuthCallbackPage />, errorElement: <RouteError /> },
    {
      path: '/',
      element: (
        <RequireAuth>
          <Layout />
        </RequireAuth>
      ),
      errorElement: <RouteError />,
      children: [
        { index: true, element: <NewChatRoute /> },
        { path: 'chat', element: <NewChatRoute /> },
        { path: 'chat/:threadId', element: <NewChatRoute /> },
        {
          path: 'knowledge',
          element: (
            <Page>
              <KnowledgeBasesPage />
            </Page>
          ),
        },
        {
          path: 'knowledge/:kbId',
          element: (
            <Page>
              <KnowledgeBasePage />
            </Page>
          ),
        },
        { path: '*', element: <NotFoundPage /> },
      ],
    },
  ],
  { basename: '/console' },
)
}
