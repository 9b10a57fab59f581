// A chat session: one AI SDK `Chat` per conversation, kept outside React so that a new chat
// keeps streaming while the address moves from /chat to /chat/<threadId>.
import { Chat } from '@ai-sdk/react'
import { DefaultChatTransport, type UIMessage } from 'ai'
import { api, ApiError, authHeaders, errorFromBody } from '../api/client'
import type { ConversationDetail } from '../api/types'
import { signOut, getToken } from '../auth/store'
import { awaitsApproval, type ApprovalAnswer } from './approvals'
import { beforeRunningContinuation, toUiMessages } from './parts'
import * as registry from './registry'

export type Outcome = 'done' | 'stopped' | 'failed' | 'awaiting' | null

type Listener = () => void

interface CancelResponse {
  success: boolean
  threadId: string
  cancelled: boolean
  streamStatus: string | null
}

interface ApprovalResponse {
  success: boolean
  threadId: string
  /** True when this decision was the last one the answer waited for: it goes on as a new run
   * of the same message, to follow with GET /chat/{threadId}/stream (false: others still wait). */
  continued?: boolean
}

/** What POST /chat accepts of a message: role user, text and file parts. */
function wireMessage(message: UIMessage): { role: 'user'; parts: Record<string, unknown>[] } {
  const parts: Record<string, unknown>[] = []
  for (const part of message.parts) {
    if (part.type === 'text') parts.push({ type: 'text', text: part.text })
    else if (part.type === 'file') {
      const file: Record<string, unknown> = { type: 'file', url: part.url, mediaType: part.mediaType }
      if (part.filename) file.filename = part.filename
      parts.push(file)
    }
  }
  return { role: 'user', parts }
}

async function failedResponse(response: Response): Promise<never> {
  const text = await response.text().catch(() => '')
  let body: unknown
  try {
    body = text ? JSON.parse(text) : undefined
  } catch {
    body = text
  }
  if (response.status === 401 && getToken()) void signOut()
  throw errorFromBody(response.status, body)
}

export class ChatSession {
  threadId: string | null
  agentId: number | null
  readonly chat: Chat<UIMessage>
  /** True until the first page that shows it has taken it over (a just-created thread). */
  fresh = false
  /** Whether the stored history has been loaded into the chat. */
  initialised: boolean
  /** Opened from the stored thread (not a new chat that got its id): resume its running answer. */
  readonly fromHistory: boolean
  outcome: Outcome = null
  private listeners = new Set<Listener>()
  /** Stop was pressed before the new chat's thread id arrived: cancel once it does. */
  private stopRequested = false
  /** Dropped from the registry (another person signed in): no longer followed. */
  private disposed = false
  private onThreadCreated: ((threadId: string) => void) | null = null
  /** A decision on a tool call is being sent, or the answer it lets go on is being followed. */
  private continuing = false

  constructor(threadId: string | null, agentId: number | null) {
    this.threadId = threadId
    this.agentId = agentId
    this.initialised = threadId === null
    this.fromHistory = threadId !== null
    const transport = new DefaultChatTransport<UIMessage>({
      // GET /chat/{id}/stream replays the running run from its start. A run that goes on after
      // tool calls were approved or denied continues the last message, which the SDK builds on
      // while a call of it is `approval-responded`; any other run replaces the message its
      // start chunk names.
      resumeStreamIsReplay: false,
      api: '/chat',
      credentials: 'omit',
      headers: () => authHeaders(),
      fetch: (input, init) => this.fetchWithThread(input, init),
      prepareSendMessagesRequest: ({ messages }) => {
        const last = messages[messages.length - 1]
        const body: Record<string, unknown> = {
          messages: last ? [wireMessage(last)] : [],
          agentId: this.agentId,
        }
        if (this.threadId) body.threadId = this.threadId
        return { api: '/chat', headers: authHeaders(), body, credentials: 'omit' }
      },
      prepareReconnectToStreamRequest: ({ id }) => ({
        api: `/chat/${encodeURIComponent(this.threadId ?? id)}/stream`,
        headers: authHeaders(),
        credentials: 'omit',
      }),
    })
    this.chat = new Chat<UIMessage>({
      id: threadId ?? undefined,
      transport,
      onFinish: ({ isAbort, isError, message }) => {
        // A stream that produced nothing leaves the outcome as it was.
        if (!isAbort && !isError && message.parts.length === 0) return
        if (isAbort) this.setOutcome('stopped')
        else if (isError) this.setOutcome('failed')
        else this.setOutcome(awaitsApproval(message) ? 'awaiting' : 'done')
      },
    })
  }

  private async fetchWithThread(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
    const signal = init?.signal
    if (this.threadId || !signal) return this.checked(await fetch(input, init))
    // A new chat: its thread id comes with the response headers. A Stop before then must not
    // drop the request unanswered (the answer would run on, unseen): the SDK is told at once,
    // the request goes on until the id is known, and the answer is then cancelled.
    const controller = new AbortController()
    const pending = fetch(input, { ...init, signal: controller.signal })
    const forward = () => controller.abort(signal.reason)
    let response: Response
    try {
      response = await new Promise<Response>((resolve, reject) => {
        const onAbort = () => {
          if (!this.stopRequested || this.disposed) forward()
          reject(signal.reason instanceof Error ? signal.reason : new DOMException('Aborted', 'AbortError'))
        }
        if (signal.aborted) onAbort()
        else signal.addEventListener('abort', onAbort, { once: true })
        pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
      })
    } catch (error) {
      if (signal.aborted && !controller.signal.aborted) void this.cancelWhenCreated(pending, controller)
      throw error
    }
    signal.addEventListener('abort', forward, { once: true })
    this.noteThread(response)
    if (signal.aborted) {
      forward()
      if (this.stopRequested && this.threadId && !this.disposed) void this.cancelOnServer(this.threadId)
    }
    return this.checked(response)
  }

  /** Stopped before the thread id arrived: wait for it, cancel the answer, drop the request. */
  private async cancelWhenCreated(pending: Promise<Response>, controller: AbortController): Promise<void> {
    try {
      const response = await pending
      this.noteThread(response)
      const threadId = response.headers.get('X-Thread-ID')
      if (threadId && response.ok && !this.disposed) await this.cancelOnServer(threadId.toLowerCase())
    } catch {
      // the request failed: nothing runs
    } finally {
      this.stopRequested = false
      controller.abort()
      this.setOutcome('stopped')
    }
  }

  private noteThread(response: Response): void {
    const threadId = response.headers.get('X-Thread-ID')
    if (threadId && !this.threadId && !this.disposed) {
      this.threadId = threadId.toLowerCase()
      this.fresh = true
      registry.adopt(this.threadId, this)
      this.onThreadCreated?.(this.threadId)
    }
  }

  private async checked(response: Response): Promise<Response> {
    if (!response.ok && response.status !== 204) await failedResponse(response)
    return response
  }

  private cancelOnServer(threadId: string): Promise<unknown> {
    return api<CancelResponse>(`/chat/${encodeURIComponent(threadId)}/cancel`, { method: 'POST' }).catch(
      () => undefined,
    )
  }

  /** A page showing this thread is on screen: the new chat it was is no longer "fresh". */
  takeOver(): void {
    this.fresh = false
  }

  setThreadCreatedHandler(handler: ((threadId: string) => void) | null): void {
    this.onThreadCreated = handler
  }

  subscribe = (listener: Listener): (() => void) => {
    this.listeners.add(listener)
    return () => {
      this.listeners.delete(listener)
    }
  }

  getOutcome = (): Outcome => this.outcome

  setOutcome(outcome: Outcome): void {
    if (this.outcome === outcome) return
    this.outcome = outcome
    this.notify()
  }

  getInitialised = (): boolean => this.initialised

  /** Puts the stored history in the chat (the first time) and notes the thread's agent. */
  loadHistory(messages: UIMessage[], agentId: number | null): void {
    this.chat.messages = messages
    if (this.agentId == null) this.agentId = agentId
    if (!this.initialised) {
      this.initialised = true
      this.notify()
    }
  }

  /** Takes the stored state when no answer streams here (polling, or after a stream ended). */
  syncFromServer(messages: UIMessage[], agentId: number | null): void {
    if (this.agentId == null) this.agentId = agentId
    if (this.busy) return
    this.chat.messages = messages
  }

  /** Called before sending: the agent the message goes to. */
  prepareSend(agentId: number): void {
    this.agentId = agentId
    this.stopRequested = false
    this.setOutcome(null)
  }

  /** A request the service refused stored nothing: take the message back; answers its text. */
  withdrawRefusedMessage(): string | null {
    const current = this.chat.messages
    const last = current[current.length - 1]
    if (last?.role !== 'user') return null
    this.chat.messages = current.slice(0, -1)
    return last.parts.map((p) => (p.type === 'text' ? p.text : '')).join('')
  }

  getContinuing = (): boolean => this.continuing

  private setContinuing(continuing: boolean): void {
    if (this.continuing === continuing) return
    this.continuing = continuing
    this.notify()
  }

  /** Sends the member's decision on a tool call. The service says whether the answer goes on
   * (`continued`: this was the last decision it waited for), as a new run of the same message,
   * followed here like a resumed answer. A decision it refuses (409: already answered, expired,
   * or the answer still running) is handed to `onRefused`, and the answer followed if it goes
   * on anyway (an expired call counts as denied); any other failure is thrown. */
  async answerApproval(
    { approvalId, approved, reason }: ApprovalAnswer,
    onRefused?: (refusal: ApiError) => void,
  ): Promise<void> {
    const threadId = this.threadId
    if (!threadId || this.busy) return
    this.setContinuing(true)
    try {
      let response: ApprovalResponse
      try {
        response = await api<ApprovalResponse>(`/chat/${encodeURIComponent(threadId)}/approvals`, {
          method: 'POST',
          body: reason ? { approvalId, approved, reason } : { approvalId, approved },
        })
      } catch (failure) {
        if (!(failure instanceof ApiError && failure.status === 409)) throw failure
        onRefused?.(failure)
        await this.followIfRunning(threadId, true)
        return
      }
      await this.chat.addToolApprovalResponse({ id: approvalId, approved, reason })
      // The outcome stays 'awaiting' until the continuation ends, here or (when it ended before
      // its stream was asked for: 204) in the stored conversation read afterwards.
      if (typeof response.continued === 'boolean') {
        if (response.continued && !this.disposed) await this.chat.resumeStream()
      } else {
        await this.followIfRunning(threadId, false)
      }
    } finally {
      this.setContinuing(false)
    }
  }

  /** Reads the stored conversation and follows its answer when one runs. `load`: the local
   * message does not have the decisions yet, so it first takes the stored start of the message
   * (up to its last decision), which the running answer's stream goes on from. */
  private async followIfRunning(threadId: string, load: boolean): Promise<void> {
    let stored: ConversationDetail
    try {
      stored = await api<ConversationDetail>('/getConversation', { query: { threadId } })
    } catch {
      return // the page reads the conversation again afterwards
    }
    if (stored.streamStatus !== 'in_progress' || this.disposed) return
    if (load) this.chat.messages = toUiMessages(beforeRunningContinuation(stored.messages))
    await this.chat.resumeStream()
  }

  private notify(): void {
    for (const listener of this.listeners) listener()
  }

  get busy(): boolean {
    return this.continuing || this.chat.status === 'submitted' || this.chat.status === 'streaming'
  }

  /** Stop: the SDK only disconnects, so also ask the service to cancel the answer (a new chat
   * without its thread id yet cancels as soon as the id arrives, see fetchWithThread). */
  async stop(): Promise<void> {
    const threadId = this.threadId
    if (!threadId && this.busy) this.stopRequested = true
    const stopping = this.chat.stop()
    this.setOutcome('stopped')
    if (threadId) await this.cancelOnServer(threadId)
    await stopping
    this.setOutcome('stopped')
  }

  /** Stops following this session (its answer is not cancelled): another person signed in. */
  disconnect(): void {
    this.disposed = true
    this.onThreadCreated = null
    if (this.busy) void this.chat.stop()
  }
}

/** The session of a stored thread: the running one, or the new chat that just got this id,
 * when there is one, else a fresh one. Pure, as React may render (and so call it) more than
 * once before it commits: the page that commits clears `fresh`. */
export function sessionForThread(threadId: string): ChatSession {
  const id = threadId.toLowerCase()
  const existing = registry.get(id) as ChatSession | undefined
  if (existing && (existing.fresh || existing.busy)) return existing
  const session = new ChatSession(id, null)
  registry.set(id, session)
  return session
}

/** The session of a new chat (no thread yet). */
export function draftSession(agentId: number | null): ChatSession {
  const current = registry.getDraft() as ChatSession | null
  if (current && !current.threadId) return current
  const session = new ChatSession(null, agentId)
  registry.setDraft(session)
  return session
}
