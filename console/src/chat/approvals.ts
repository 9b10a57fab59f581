// Tool calls that wait for the member's approval before they are made.
import { isToolUIPart, type UIMessage } from 'ai'
import type { ToolApproval } from './parts'

export interface ApprovalAnswer {
  approvalId: string
  approved: boolean
  reason?: string
}

export function isExpired(approval: ToolApproval | undefined, now = Date.now()): boolean {
  const deadline = approval?.expiresAt ? Date.parse(approval.expiresAt) : NaN
  return deadline <= now
}

/** Whether a call of the message still waits for a decision (an expired one: to be dismissed,
 * which lets the answer go on). */
export function awaitsApproval(message: UIMessage | undefined): boolean {
  return Boolean(message?.parts.some((part) => isToolUIPart(part) && part.state === 'approval-requested'))
}
