// Where chat sessions are kept between pages. Kept free of the AI SDK so that the layout can
// use it without loading the chat code.
import { subscribeIdentity } from '../auth/store'

export interface SessionLike {
  threadId: string | null
  readonly busy: boolean
  /** Drops the connection of a running answer (the answer itself is not cancelled). */
  disconnect(): void
}

const sessions = new Map<string, SessionLike>()
let draft: SessionLike | null = null

export function get(threadId: string): SessionLike | undefined {
  return sessions.get(threadId)
}

export function set(threadId: string, session: SessionLike): void {
  sessions.set(threadId, session)
}

export function getDraft(): SessionLike | null {
  return draft
}

export function setDraft(session: SessionLike | null): void {
  draft = session
}

/** A new chat got its thread id: it is now that thread's session. */
export function adopt(threadId: string, session: SessionLike): void {
  sessions.set(threadId, session)
  if (draft === session) draft = null
}

/** Starts over: the next new chat gets an empty session (unless the draft is still answering). */
export function discardDraft(): void {
  if (draft && !draft.busy) draft = null
}

export function forgetThread(threadId: string): void {
  sessions.delete(threadId.toLowerCase())
}

/** Forgets every session (another person signed in, or nobody): their answers stop streaming here. */
export function clearAll(): void {
  const all = new Set(sessions.values())
  if (draft) all.add(draft)
  sessions.clear()
  draft = null
  for (const session of all) session.disconnect()
}

subscribeIdentity(clearAll)
