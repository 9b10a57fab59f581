// Stored message parts (GET /getConversation) → AI SDK UI message parts.
import type { UIMessage } from 'ai'
import type { StoredMessage, StoredPart } from '../api/types'

type Part = UIMessage['parts'][number]

export interface SourceLocation {
  kbId: number
  fileId: string
  pageNumber: number | null
}

function str(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined
}

/** A tool call's part, `tool-<name>`, as built here (the SDK's type is a union per state). */
interface ToolPart {
  type: string
  toolCallId: string
  state: string
  input?: unknown
  output?: unknown
  errorText?: string
  approval?: ToolApproval
}

/** A tool call's approval; `expiresAt` is the platform's (stored parts only). */
export interface ToolApproval {
  id: string
  approved?: boolean
  reason?: string
  expiresAt?: string
}

/** A call's stored result: its output, its error, or its denial. */
function settleTool(part: ToolPart, result: StoredPart): void {
  const value = result.result ?? result.output
  delete part.output
  delete part.errorText
  if (result.denied === true) {
    part.state = 'output-denied'
    part.approval = { ...part.approval, id: part.approval?.id ?? '', approved: false }
  } else if (result.isError) {
    part.state = 'output-error'
    part.errorText = typeof value === 'string' ? value : JSON.stringify(value)
  } else {
    part.state = 'output-available'
    part.output = value
  }
}

export function toUiParts(stored: StoredPart[]): Part[] {
  const parts: Part[] = []
  const tools = new Map<string, ToolPart>()
  const approvals = new Map<string, ToolPart>()
  for (const p of stored) {
    switch (p.type) {
      case 'text':
        if (typeof p.text === 'string') parts.push({ type: 'text', text: p.text, state: 'done' })
        break
      case 'file':
        if (typeof p.url === 'string')
          parts.push({
            type: 'file',
            url: p.url,
            mediaType: str(p.mediaType) ?? 'application/octet-stream',
            filename: str(p.filename),
          })
        break
      case 'source-document':
        parts.push({
          type: 'source-document',
          sourceId: str(p.sourceId) ?? '',
          mediaType: str(p.mediaType) ?? 'text/plain',
          title: str(p.title) ?? str(p.filename) ?? 'Source',
          filename: str(p.filename),
          providerMetadata: p.providerMetadata as Record<string, Record<string, never>> | undefined,
        } as Part)
        break
      case 'tool-invocation': {
        const toolCallId = str(p.toolCallId) ?? `call-${parts.length}`
        const part: ToolPart = {
          type: `tool-${str(p.toolName) ?? 'tool'}`,
          toolCallId,
          state: 'input-available',
          input: p.args ?? p.input,
        }
        tools.set(toolCallId, part)
        parts.push(part as Part)
        break
      }
      case 'tool-approval-request': {
        const part = tools.get(str(p.toolCallId) ?? '')
        const id = str(p.approvalId)
        if (!part || !id) break
        part.state = 'approval-requested'
        part.approval = { id, expiresAt: str(p.expiresAt) }
        approvals.set(id, part)
        break
      }
      case 'tool-approval-response': {
        const id = str(p.approvalId) ?? ''
        const part = approvals.get(id) ?? tools.get(str(p.toolCallId) ?? '')
        if (!part) break
        part.approval = { ...part.approval, id, approved: p.approved === true, reason: str(p.reason) }
        if (part.state === 'approval-requested') part.state = 'approval-responded'
        break
      }
      case 'tool-result': {
        const toolCallId = str(p.toolCallId) ?? ''
        let part = tools.get(toolCallId)
        if (!part) {
          part = { type: `tool-${str(p.toolName) ?? 'tool'}`, toolCallId, state: 'input-available' }
          tools.set(toolCallId, part)
          parts.push(part as Part)
        }
        settleTool(part, p)
        break
      }
      case 'data-error': {
        const data = (p.data ?? {}) as { errorText?: unknown }
        parts.push({ type: 'data-error', data: { errorText: str(data.errorText) ?? 'The answer failed.' } } as Part)
        break
      }
      default:
        break
    }
  }
  return parts
}

/** A running answer's stored messages as its resumed stream expects them. An answer that goes on
 * after its tool calls were approved or denied is a new run of the same message, whose stream
 * replays from its first approval answer: what was stored after the last answer is left out. */
export function beforeRunningContinuation(stored: StoredMessage[]): StoredMessage[] {
  const last = stored[stored.length - 1]
  if (last?.role !== 'assistant') return stored
  const parts = last.parts ?? []
  const end = parts.findLastIndex((p) => p.type === 'tool-approval-response')
  if (end === -1) return stored
  return [...stored.slice(0, -1), { ...last, parts: parts.slice(0, end + 1) }]
}

export function toUiMessages(stored: StoredMessage[]): UIMessage[] {
  return stored
    .filter((m) => m.role === 'user' || m.role === 'assistant')
    .map((m) => ({ id: m.id, role: m.role, parts: toUiParts(m.parts ?? []) }))
}

/** The platform's location of a cited passage, when the source carries one. */
export function sourceLocation(part: { providerMetadata?: unknown }): SourceLocation | null {
  const meta = part.providerMetadata as { agentPlatform?: Partial<SourceLocation> } | undefined
  const loc = meta?.agentPlatform
  if (!loc || typeof loc.kbId !== 'number' || typeof loc.fileId !== 'string') return null
  return {
    kbId: loc.kbId,
    fileId: loc.fileId,
    pageNumber: typeof loc.pageNumber === 'number' ? loc.pageNumber : null,
  }
}

/** The raw Markdown of a message: its text parts. */
export function rawText(message: UIMessage): string {
  return message.parts
    .filter((p): p is Extract<Part, { type: 'text' }> => p.type === 'text')
    .map((p) => p.text)
    .join('\n\n')
}
