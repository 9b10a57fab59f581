import { lazy, Suspense, useCallback, useEffect, useId, useLayoutEffect, useMemo, useRef, useState, useSyncExternalStore } from 'react'
import { useChat } from '@ai-sdk/react'
import type { UIMessage } from 'ai'
import { useQuery, useQueryClient } from '@tanstack/react-query'
import { Link, useLocation, useNavigate, useParams, useSearchParams } from 'react-router'
import { api, ApiError } from '../api/client'
import { keys, orderAgents, useAgents, useConsoleLayout } from '../api/hooks'
import type { Agent, ConversationDetail, StreamStatus } from '../api/types'
import { ErrorNote, errorMessage } from '../ui/ErrorNote'
import type { ApprovalAnswer } from './approvals'
import { asApiError, chatErrorMessage } from './errors'
import { MessageView, type CitationTarget } from './MessageView'
import { beforeRunningContinuation, toUiMessages } from './parts'
import { draftSession, sessionForThread, type ChatSession, type Outcome } from './session'

const FilePreview = lazy(() => import('../knowledge').then((m) => ({ default: m.FilePreview })))

const OUTCOME_TEXT: Record<Exclude<Outcome, null>, string> = {
  done: 'Done',
  stopped: 'Stopped',
  failed: 'Failed',
  awaiting: 'Waiting for approval',
}

/** Whether the last answer already shows its stored failure (a `data-error` part). */
function endsWithStoredError(messages: UIMessage[]): boolean {
  const last = messages[messages.length - 1]
  return last?.role === 'assistant' && last.parts.some((p) => p.type === 'data-error')
}

function useOutcome(session: ChatSession): Outcome {
  return useSyncExternalStore(session.subscribe, session.getOutcome, session.getOutcome)
}

/** Whether a decision on a tool call is being sent (or the answer it lets go on followed). */
function useContinuing(session: ChatSession): boolean {
  return useSyncExternalStore(session.subscribe, session.getContinuing, session.getContinuing)
}

function useChatStatus(session: ChatSession) {
  const chat = session.chat
  return useSyncExternalStore(
    (cb) => chat['~registerStatusCallback'](cb),
    () => chat.status,
    () => chat.status,
  )
}

/** Agents in picker order: the organization's default agent first. */
function usePickerAgents() {
  const agents = useAgents()
  const settings = useConsoleLayout()
  const ordered = useMemo(
    () => orderAgents(agents.data ?? [], settings.data?.defaultAgentId ?? null),
    [agents.data, settings.data],
  )
  return { agents: ordered, query: agents, settingsLoading: settings.isLoading }
}

export default function ChatPage() {
  const { threadId } = useParams()
  const location = useLocation()
  // Each visit to a new chat (the sidebar's agent links, "New chat") starts over: its own agent
  // choice and the draft of that moment (a draft still answering is kept, see draftSession).
  return threadId ? <ThreadChat key={threadId} threadId={threadId} /> : <NewChat key={location.key} />
}

function NewChat() {
  const navigate = useNavigate()
  const queryClient = useQueryClient()
  const [searchParams] = useSearchParams()
  const { agents, query, settingsLoading } = usePickerAgents()
  const requested = Number(searchParams.get('agentId')) || null
  const [chosen, setChosen] = useState<number | null>(null)
  const [session] = useState(() => draftSession(null))
  const fallback = requested && agents.some((a) => a.id === requested) ? requested : (agents[0]?.id ?? null)
  const agentId = chosen ?? fallback

  useEffect(() => {
    session.setThreadCreatedHandler((threadId) => {
      void queryClient.invalidateQueries({ queryKey: keys.conversations })
      void navigate(`/chat/${threadId}`, { replace: true })
    })
    return () => session.setThreadCreatedHandler(null)
  }, [session, navigate, queryClient])

  return (
    <ChatView
      session={session}
      title="New chat"
      agents={agents}
      agentsLoading={query.isLoading || settingsLoading}
      agentsError={query.error}
      agentId={agentId}
      onAgentChange={setChosen}
      agentLocked={false}
      resume={false}
    />
  )
}

function ThreadChat({ threadId }: { threadId: string }) {
  const session = useMemo(() => sessionForThread(threadId), [threadId])
  // Taken over once this page is on screen: a later visit to the thread starts from its history.
  useEffect(() => {
    session.takeOver()
  }, [session])
  const queryClient = useQueryClient()
  const { agents, query } = usePickerAgents()
  const chatStatus = useChatStatus(session)
  const busy = chatStatus === 'submitted' || chatStatus === 'streaming'
  const initialised = useSyncExternalStore(session.subscribe, session.getInitialised, session.getInitialised)
  const sawRunning = useRef(false)

  const conversation = useQuery({
    queryKey: keys.conversation(threadId),
    queryFn: ({ signal }) => api<ConversationDetail>('/getConversation', { query: { threadId }, signal }),
    // An answer running without a stream to follow (e.g. a non-streaming request): poll.
    refetchInterval: (q) => (q.state.data?.streamStatus === 'in_progress' && !busy ? 1500 : false),
    staleTime: 0,
  })
  const data = conversation.data
  const polling = data?.streamStatus === 'in_progress' && !busy && initialised

  useEffect(() => {
    if (!data) return
    if (data.streamStatus === 'in_progress') sawRunning.current = true
    if (!session.initialised) {
      const stored = data.streamStatus === 'in_progress' ? beforeRunningContinuation(data.messages) : data.messages
      session.loadHistory(toUiMessages(stored), data.agentId)
      if (data.streamStatus === 'awaiting_approval') session.setOutcome('awaiting')
      return
    }
    if (session.busy) return
    session.syncFromServer(toUiMessages(data.messages), data.agentId)
    if (data.streamStatus === 'awaiting_approval') session.setOutcome('awaiting')
    else if (data.streamStatus && data.streamStatus !== 'in_progress' && (sawRunning.current || session.outcome)) {
      if (data.streamStatus === 'cancelled') session.setOutcome('stopped')
      else if (data.streamStatus === 'failed') session.setOutcome('failed')
      else if (!session.outcome || session.outcome === 'awaiting') session.setOutcome('done')
    }
  }, [data, session])

  // When an answer ends, read the stored conversation (its final state and title).
  const wasBusy = useRef(busy)
  useEffect(() => {
    if (wasBusy.current && !busy) {
      void queryClient.invalidateQueries({ queryKey: keys.conversation(threadId) })
      void queryClient.invalidateQueries({ queryKey: keys.conversations })
    }
    wasBusy.current = busy
  }, [busy, threadId, queryClient])

  if (!initialised) {
    if (conversation.error) {
      const notFound = conversation.error instanceof ApiError && (conversation.error.status === 404 || conversation.error.status === 400)
      return (
        <section className="chat-page">
          <h1>{notFound ? 'Conversation not found' : 'Could not open the conversation'}</h1>
          <ErrorNote error={conversation.error} />
          <p>
            <Link to="/">Start a new chat</Link>
          </p>
        </section>
      )
    }
    return (
      <section className="chat-page">
        <p role="status" className="loading">
          Loading the conversation…
        </p>
      </section>
    )
  }

  const agentId = session.agentId ?? data?.agentId ?? null
  return (
    <ChatView
      session={session}
      title={data?.title || 'Untitled conversation'}
      agents={agents}
      agentsLoading={query.isLoading}
      agentsError={query.error}
      agentId={agentId}
      onAgentChange={() => undefined}
      agentLocked
      resume={session.fromHistory}
      polling={polling}
      streamStatus={data ? data.streamStatus : undefined}
    />
  )
}

function ChatView(props: {
  session: ChatSession
  title: string
  agents: Agent[]
  agentsLoading: boolean
  agentsError: unknown
  agentId: number | null
  onAgentChange: (agentId: number) => void
  agentLocked: boolean
  resume: boolean
  polling?: boolean
  /** The stored conversation's state, when read (undefined: not known). */
  streamStatus?: StreamStatus | null
}) {
  const { session, title, agents, agentsLoading, agentsError, agentId, onAgentChange, agentLocked, resume, polling } = props
  const { streamStatus } = props
  const { messages, status, error, sendMessage } = useChat({ chat: session.chat, resume })
  const outcome = useOutcome(session)
  const continuing = useContinuing(session)
  const queryClient = useQueryClient()
  const [approvalError, setApprovalError] = useState<unknown>(null)
  const [input, setInput] = useState('')
  const [citation, setCitation] = useState<CitationTarget | null>(null)
  const inputId = useId()
  const agentSelectId = useId()
  const streaming = status === 'submitted' || status === 'streaming'
  // Busy too while a decision on a tool call is being sent: nothing else is sent meanwhile.
  const busy = streaming || continuing
  const answering = streaming || Boolean(polling)

  // Auto-scroll follows the answer only while the reader is at the bottom.
  const listRef = useRef<HTMLDivElement>(null)
  const following = useRef(true)
  const [showJump, setShowJump] = useState(false)
  const onScroll = useCallback(() => {
    const el = listRef.current
    if (!el) return
    const atBottom = el.scrollHeight - el.scrollTop - el.clientHeight < 48
    following.current = atBottom
    setShowJump(!atBottom)
  }, [])
  const scrollToEnd = useCallback(() => {
    const el = listRef.current
    if (!el) return
    el.scrollTop = el.scrollHeight
    following.current = true
    setShowJump(false)
  }, [])
  useLayoutEffect(() => {
    if (following.current) {
      const el = listRef.current
      if (el) el.scrollTop = el.scrollHeight
    }
  }, [messages, status])

  const agentKnown = agentId != null && agents.some((a) => a.id === agentId)
  const canSend = !busy && input.trim() !== '' && agentId != null

  // A decision the service refused (404: no such approval; 409: answered, expired, or the answer
  // still running) is shown, and the stored conversation read again for the call's current state.
  const answerApproval = useCallback(
    async (answer: ApprovalAnswer) => {
      setApprovalError(null)
      try {
        await session.answerApproval(answer, setApprovalError)
      } catch (failure) {
        setApprovalError(failure)
      } finally {
        if (session.threadId) void queryClient.invalidateQueries({ queryKey: keys.conversation(session.threadId) })
      }
    },
    [session, queryClient],
  )

  const send = () => {
    const text = input.trim()
    if (!text || busy || agentId == null) return
    setApprovalError(null)
    session.prepareSend(agentId)
    setInput('')
    scrollToEnd()
    void sendMessage({ text }).then(() => {
      // A request the service refused (e.g. the spend cap) stored nothing: take the message back.
      if (session.chat.status === 'error' && asApiError(session.chat.error)) {
        const withdrawn = session.withdrawRefusedMessage()
        if (withdrawn) setInput((value) => value || withdrawn)
      }
    })
  }

  // Decisions go to the last message's calls, once no answer streams and no decision is being
  // sent, while the stored conversation (when read) waits for them.
  const lastIndex = messages.length - 1
  const decisions = useMemo(() => ({ onAnswer: answerApproval, enabled: !busy }), [answerApproval, busy])
  const decidable = streamStatus === undefined || streamStatus === 'awaiting_approval'

  const statusText = answering ? 'Answering…' : outcome ? OUTCOME_TEXT[outcome] : ''

  return (
    <section className="chat-page" aria-labelledby="chat-title">
      <header className="chat-header">
        <h1 id="chat-title" className="chat-title">
          {title}
        </h1>
        <div className="agent-picker">
          <label htmlFor={agentSelectId}>Agent</label>
          <select
            id={agentSelectId}
            value={agentId ?? ''}
            disabled={agentLocked || busy || agents.length === 0}
            onChange={(event) => onAgentChange(Number(event.target.value))}
          >
            {agentId != null && !agentKnown && <option value={agentId}>{agentsLoading ? 'Loading…' : `Agent ${agentId}`}</option>}
            {agentId == null && <option value="">{agentsLoading ? 'Loading…' : 'No agents'}</option>}
            {agents.map((agent) => (
              <option key={agent.id} value={agent.id}>
                {agent.name}
              </option>
            ))}
          </select>
        </div>
      </header>
      {agentsError ? <ErrorNote error={agentsError} /> : null}
      {!agentsLoading && !agentsError && agents.length === 0 && !agentLocked && (
        <p className="note">This organization has no agents yet. An administrator can create one.</p>
      )}

      <div
        ref={listRef}
        className="message-list"
        role="log"
        aria-label="Chat history"
        aria-live="off"
        aria-busy={answering}
        tabIndex={0}
        onScroll={onScroll}
      >
        {messages.length === 0 && <p className="empty">Ask the agent a question to start.</p>}
        {messages.map((message, index) => (
          <MessageView
            key={message.id}
            message={message}
            onCite={setCitation}
            decisions={decidable && index === lastIndex && message.role === 'assistant' ? decisions : undefined}
          />
        ))}
        {status === 'submitted' && (
          <p className="thinking" aria-hidden="true">
            …
          </p>
        )}
      </div>
      {showJump && (
        <button type="button" className="jump" onClick={scrollToEnd}>
          Jump to the latest message
        </button>
      )}

      {error && !endsWithStoredError(messages) && (
        <div className="error-note" role="alert">
          <p>{asApiError(error) ? chatErrorMessage(error) : `The answer failed: ${chatErrorMessage(error)}`}</p>
        </div>
      )}

      {approvalError ? (
        <div className="error-note" role="alert">
          <p>The decision was not recorded: {errorMessage(approvalError)}</p>
        </div>
      ) : null}

      <p className="chat-status" role="status" aria-live="polite" data-testid="chat-status">
        {statusText}
      </p>

      <form
        className="composer"
        onSubmit={(event) => {
          event.preventDefault()
          send()
        }}
      >
        <label htmlFor={inputId} className="visually-hidden">
          Message
        </label>
        <textarea
          id={inputId}
          name="message"
          rows={2}
          value={input}
          placeholder="Write a message…"
          enterKeyHint="send"
          onChange={(event) => setInput(event.target.value)}
          onKeyDown={(event) => {
            if (event.key === 'Enter' && !event.shiftKey && !event.nativeEvent.isComposing) {
              event.preventDefault()
              send()
            }
          }}
        />
        <div className="composer-buttons">
          {answering && (
            <button type="button" className="button-secondary" onClick={() => void session.stop()}>
              Stop
            </button>
          )}
          <button type="submit" className="button-primary" disabled={!canSend}>
            Send
          </button>
        </div>
      </form>

      {citation && (
        <Suspense fallback={null}>
          <FilePreview
            kbId={citation.kbId}
            fileId={citation.fileId}
            fileName={citation.fileName}
            page={citation.pageNumber}
            onClose={() => setCitation(null)}
          />
        </Suspense>
      )}
    </section>
  )
}
