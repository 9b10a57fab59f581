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

export function toUiParts(stored: StoredPart[]): Part[] {
  const parts: Part[] = []
  const toolIndex = new Map<string, number>()
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
        const toolName = str(p.toolName) ?? 'tool'
        toolIndex.set(toolCallId, parts.length)
        parts.push({
          type: `tool-${toolName}`,
          toolCallId,
          state: 'input-available',
          input: p.args ?? p.input,
        } as Part)
        break
      }
      case 'tool-result': {
        const toolCallId = str(p.toolCallId) ?? ''
        const toolName = str(p.toolName) ?? 'tool'
        const index = toolIndex.get(toolCallId)
        const input = index !== undefined ? (parts[index] as { input?: unknown }).input : undefined
        const result = p.result ?? p.output
        const part = (
          p.isError
            ? {
                type: `tool-${toolName}`,
                toolCallId,
                state: 'output-error',
                input,
                errorText: typeof result === 'string' ? result : JSON.stringify(result),
              }
            : { type: `tool-${toolName}`, toolCallId, state: 'output-available', input, output: result }
        ) as Part
        if (index !== undefined) parts[index] = part
        else parts.push(part)
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
