import { useEffect, useId, useState } from 'react'
import { isExpired, type ApprovalAnswer } from './approvals'
import type { ToolApproval } from './parts'

export interface ToolPartShape {
  type: string
  toolName?: string
  toolCallId: string
  state: string
  input?: unknown
  output?: unknown
  errorText?: string
  approval?: ToolApproval
}

export type AnswerApproval = (answer: ApprovalAnswer) => Promise<void>

/** The decision controls of a message's calls waiting for approval: none (not shown), or shown,
 * enabled only while the chat can take a decision (no answer streaming, no decision being sent). */
export interface Decisions {
  onAnswer: AnswerApproval
  enabled: boolean
}

function pretty(value: unknown): string {
  if (value === undefined) return ''
  if (typeof value === 'string') return value
  try {
    return JSON.stringify(value, null, 2)
  } catch {
    return String(value)
  }
}

const TOOL_STATE: Record<string, string> = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'output-available': 'done',
  'output-error': 'failed',
  'output-denied': 'denied',
}

function stateText(part: ToolPartShape): string {
  if (part.state === 'approval-responded') return part.approval?.approved ? 'approved' : 'denied'
  return TOOL_STATE[part.state] ?? part.state
}

function toolName(part: ToolPartShape): string {
  return part.type === 'dynamic-tool' ? (part.toolName ?? 'tool') : part.type.slice('tool-'.length)
}

function isDenied(part: ToolPartShape): boolean {
  return part.state === 'output-denied' || (part.state === 'approval-responded' && part.approval?.approved === false)
}

export function ToolCall({ part, decisions }: { part: ToolPartShape; decisions?: Decisions }) {
  if (part.state === 'approval-requested') return <ApprovalRequest part={part} decisions={decisions} />
  const reason = part.approval?.reason
  return (
    <>
      <details className="tool-call">
        <summary>
          Tool call: <code>{toolName(part)}</code>{' '}
          <span className={`tool-state tool-state-${part.state}`}>({stateText(part)})</span>
        </summary>
        <div className="tool-body">
          <h4>Input</h4>
          <pre>{pretty(part.input) || '(none)'}</pre>
          {part.state === 'output-available' && (
            <>
              <h4>Output</h4>
              <pre>{pretty(part.output) || '(empty)'}</pre>
            </>
          )}
          {part.state === 'output-error' && (
            <>
              <h4>Error</h4>
              <pre>{part.errorText}</pre>
            </>
          )}
        </div>
      </details>
      {isDenied(part) && <p className="tool-denied">{reason ? `Denied: ${reason}` : 'Denied'}</p>}
    </>
  )
}

/** Whether the approval has expired, turning true when it does while on screen. */
function useExpired(approval: ToolApproval | undefined): boolean {
  const deadline = approval?.expiresAt ? Date.parse(approval.expiresAt) : NaN
  const [now, setNow] = useState(() => Date.now())
  useEffect(() => {
    if (!(deadline > now)) return
    const left = Math.max(0, deadline - Date.now())
    const timer = setTimeout(() => setNow(Date.now()), Math.min(left, 2 ** 31 - 1))
    return () => clearTimeout(timer)
  }, [deadline, now])
  return isExpired(approval, now)
}

function ApprovalRequest({ part, decisions }: { part: ToolPartShape; decisions?: Decisions }) {
  const name = toolName(part)
  const titleId = useId()
  const expired = useExpired(part.approval)
  const approvalId = part.approval?.id
  const controls = decisions && approvalId ? { approvalId, decisions } : null
  return (
    <div className="tool-approval" role="group" aria-labelledby={titleId}>
      <p id={titleId} className="tool-approval-title">
        Tool call: <code>{name}</code>{' '}
        <span className="tool-state tool-state-approval-requested">
          ({expired ? 'approval expired' : 'waiting for approval'})
        </span>
      </p>
      <h4>Input</h4>
      <pre>{pretty(part.input) || '(none)'}</pre>
      {expired ? (
        <>
          <p className="note">The approval expired: the call was not made.</p>
          {controls && <Dismissal {...controls} />}
        </>
      ) : controls ? (
        <Decision {...controls} />
      ) : null}
    </div>
  )
}

/** Sends a decision, `sending` true until the service has taken it (and the answer it lets go
 * on has been followed). */
function useSend(onAnswer: AnswerApproval) {
  const [sending, setSending] = useState(false)
  const send = (answer: ApprovalAnswer) => {
    setSending(true)
    void onAnswer(answer).finally(() => setSending(false))
  }
  return { sending, send }
}

/** An expired approval counts as denied: dismissing it says so, and the answer goes on. */
function Dismissal({ approvalId, decisions }: { approvalId: string; decisions: Decisions }) {
  const { sending, send } = useSend(decisions.onAnswer)
  return (
    <div className="tool-approval-actions">
      <button
        type="button"
        className="button-secondary"
        disabled={sending || !decisions.enabled}
        onClick={() => send({ approvalId, approved: false })}
      >
        Dismiss
      </button>
    </div>
  )
}

function Decision({ approvalId, decisions }: { approvalId: string; decisions: Decisions }) {
  const [denying, setDenying] = useState(false)
  const [reason, setReason] = useState('')
  const { sending, send } = useSend(decisions.onAnswer)
  const reasonId = useId()
  const disabled = sending || !decisions.enabled

  const answer = (approved: boolean) => {
    const trimmed = reason.trim()
    send({ approvalId, approved, reason: approved || !trimmed ? undefined : trimmed })
  }

  if (!denying) {
    return (
      <div className="tool-approval-actions">
        <button type="button" className="button-primary" disabled={disabled} onClick={() => answer(true)}>
          Approve
        </button>
        <button type="button" className="button-secondary" disabled={disabled} onClick={() => setDenying(true)}>
          Deny
        </button>
      </div>
    )
  }
  return (
    <form
      className="tool-approval-deny"
      onSubmit={(event) => {
        event.preventDefault()
        if (!disabled) answer(false)
      }}
    >
      <label htmlFor={reasonId}>Reason (optional)</label>
      <textarea
        id={reasonId}
        autoFocus
        rows={2}
        maxLength={1000}
        value={reason}
        onChange={(event) => setReason(event.target.value)}
      />
      <div className="tool-approval-actions">
        <button type="submit" className="button-danger" disabled={disabled}>
          Deny
        </button>
        <button type="button" className="button-secondary" disabled={sending} onClick={() => setDenying(false)}>
          Cancel
        </button>
      </div>
    </form>
  )
}
