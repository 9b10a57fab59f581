import { useEffect, useId, useRef, useState } from 'react'
import { Link, NavLink, Outlet, useNavigate } from 'react-router'
import { orderAgents, useAgents, useConsoleLayout } from '../api/hooks'
import type { SidebarLink } from '../api/types'
import { signOut } from '../auth/store'
import { useAuth } from '../auth/useAuth'
import { discardDraft } from '../chat/registry'
import { Dialog } from '../ui/Dialog'
import { ErrorNote } from '../ui/ErrorNote'
import { ConversationList } from './ConversationList'

function safeLinks(links: SidebarLink[] | undefined): SidebarLink[] {
  return (links ?? []).filter((link) => {
    try {
      const url = new URL(link.url)
      return url.protocol === 'http:' || url.protocol === 'https:'
    } catch {
      return false
    }
  })
}

function AgentsSection({ onNavigate }: { onNavigate: () => void }) {
  const agents = useAgents()
  const settings = useConsoleLayout()
  const ordered = orderAgents(agents.data ?? [], null, settings.data?.sidebarPinnedAppIds ?? [])
  const pinned = new Set(settings.data?.sidebarPinnedAppIds ?? [])
  return (
    <section className="sidebar-section">
      <h2 className="sidebar-heading">
        Agents
      </h2>
      {agents.isLoading && <p className="muted">Loading…</p>}
      <ErrorNote error={agents.error} />
      {agents.data && agents.data.length === 0 && <p className="muted">No agents yet.</p>}
      <ul className="agent-list">
        {ordered.map((agent) => (
          <li key={agent.id}>
            <Link
              to={`/?agentId=${agent.id}`}
              className="agent-link"
              title={agent.description ?? undefined}
              onClick={() => {
                discardDraft()
                onNavigate()
              }}
            >
              {agent.name}
              {pinned.has(agent.id) && <span className="pin"> (pinned)</span>}
            </Link>
          </li>
        ))}
      </ul>
    </section>
  )
}

function LinksSection() {
  const settings = useConsoleLayout()
  const links = safeLinks(settings.data?.sidebarLinks)
  if (links.length === 0) return null
  return (
    <section className="sidebar-section">
      <h2 className="sidebar-heading">
        Links
      </h2>
      <ul className="link-list">
        {links.map((link, index) => (
          <li key={`${link.url}-${index}`}>
            <a href={link.url} target="_blank" rel="noopener noreferrer">
              {link.label}
            </a>
          </li>
        ))}
      </ul>
    </section>
  )
}

function FeedbackButton() {
  const settings = useConsoleLayout()
  const [open, setOpen] = useState(false)
  const html = settings.data?.feedbackModal?.customHtml ?? ''
  if (!html.trim()) return null
  return (
    <>
      <button type="button" className="button-small feedback-button" onClick={() => setOpen(true)}>
        Feedback
      </button>
      <Dialog title="Feedback" open={open} onClose={() => setOpen(false)} wide>
        {/* No allow-scripts: the organization's HTML is shown, never run. */}
        <iframe className="feedback-frame" sandbox="" srcDoc={html} title="Feedback" />
      </Dialog>
    </>
  )
}

function UserFacts({ className, testId }: { className: string; testId?: string }) {
  const { claims } = useAuth()
  return (
    <div className={className} data-testid={testId}>
      <span className="user-id">{claims?.sub ?? 'Unknown user'}</span>
      {claims?.orgId ? (
        <span className="user-org">
          {claims.orgId}
          {claims.orgRole ? ` · ${claims.orgRole}` : ''}
        </span>
      ) : (
        <span className="user-org">No organization</span>
      )}
    </div>
  )
}

function UserBox() {
  const navigate = useNavigate()
  return (
    <div className="user-box">
      <UserFacts className="user-facts" testId="user-facts" />
      <button
        type="button"
        className="button-small"
        onClick={() => {
          void signOut({ redirect: true }).then(() => navigate('/sign-in', { replace: true }))
        }}
      >
        Sign out
      </button>
    </div>
  )
}

export function Layout() {
  const [menuOpen, setMenuOpen] = useState(false)
  const navigate = useNavigate()
  const { claims } = useAuth()
  const sidebarId = useId()

  const menuButtonRef = useRef<HTMLButtonElement>(null)
  const sidebarRef = useRef<HTMLElement>(null)

  useEffect(() => {
    if (!menuOpen) return
    // On a small screen the menu opens over the page: take focus into it, and back on Escape.
    if (menuButtonRef.current && getComputedStyle(menuButtonRef.current).display !== 'none') {
      sidebarRef.current?.querySelector<HTMLElement>('button, a[href]')?.focus()
    }
    const onKey = (event: KeyboardEvent) => {
      if (event.key === 'Escape') {
        setMenuOpen(false)
        menuButtonRef.current?.focus()
      }
    }
    document.addEventListener('keydown', onKey)
    return () => document.removeEventListener('keydown', onKey)
  }, [menuOpen])

  const close = () => setMenuOpen(false)

  return (
    <div className={menuOpen ? 'app app-menu-open' : 'app'}>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar">
        <button
          ref={menuButtonRef}
          type="button"
          className="menu-button"
          aria-expanded={menuOpen}
          aria-controls={sidebarId}
          onClick={() => setMenuOpen((open) => !open)}
        >
          Menu
        </button>
        <Link to="/" className="brand">
          Agent Platform
        </Link>
        <UserBox />
      </header>
      <div className="shell">
        <nav id={sidebarId} ref={sidebarRef} className="sidebar" aria-label="Console">
          <button
            type="button"
            className="button-primary new-chat"
            onClick={() => {
              discardDraft()
              close()
              void navigate('/')
            }}
          >
            New chat
          </button>
          <NavLink to="/knowledge" className="nav-link" onClick={close}>
            Knowledge
          </NavLink>
          <AgentsSection onNavigate={close} />
          <ConversationList onNavigate={close} />
          <LinksSection />
          <FeedbackButton />
          <UserFacts className="sidebar-user" />
        </nav>
        {menuOpen && <div className="scrim" aria-hidden="true" onClick={close} />}
        <main id="main" className="main" tabIndex={-1}>
          {claims && !claims.orgId && (
            <div className="error-note" role="alert">
              <p>Your sign-in carries no organization, so the console has nothing to show. Ask an administrator to add you to one.</p>
            </div>
          )}
          <Outlet />
        </main>
      </div>
    </div>
  )
}
