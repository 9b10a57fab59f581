import { lazy, Suspense } from 'react'
import type { UIMessage } from 'ai'
import { CopyButton } from '../ui/CopyButton'
import { rawText, sourceLocation, type SourceLocation } from './parts'

const Markdown = lazy(() => import('./Markdown'))

type Part = UIMessage['parts'][number]

export interface CitationTarget extends SourceLocation {
  fileName: string
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

interface ToolPartShape {
  type: string
  toolName?: string
  toolCallId: string
  state: string
  input?: unknown
  output?: unknown
  errorText?: string
}

const TOOL_STATE: Record<string, string> = {
  'input-streaming': 'preparing',
  'input-available': 'running',
  'output-available': 'done',
  'output-error': 'failed',
}

function ToolCall({ part }: { part: ToolPartShape }) {
  const name = part.type === 'dynamic-tool' ? (part.toolName ?? 'tool') : part.type.slice('tool-'.length)
  const state = TOOL_STATE[part.state] ?? part.state
  return (
    <details className="tool-call">
      <summary>
        Tool call: <code>{name}</code> <span className={`tool-state tool-state-${part.state}`}>({state})</span>
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
  )
}

function isToolPart(part: Part): boolean {
  return part.type === 'dynamic-tool' || part.type.startsWith('tool-')
}

function PlainText({ text }: { text: string }) {
  return <div className="markdown plain">{text}</div>
}

export function MessageView({
  message,
  onCite,
}: {
  message: UIMessage
  onCite: (target: CitationTarget) => void
}) {
  const isUser = message.role === 'user'
  const sources = message.parts.filter(
    (p): p is Extract<Part, { type: 'source-document' }> => p.type === 'source-document',
  )
  const text = rawText(message)
  return (
    <article
      className={isUser ? 'message message-user' : 'message message-assistant'}
      aria-label={isUser ? 'You said' : 'Answer'}
      data-testid={isUser ? 'message-user' : 'message-assistant'}
    >
      <div className="message-role" aria-hidden="true">
        {isUser ? 'You' : 'Assistant'}
      </div>
      <div className="message-body">
        {message.parts.map((part, index) => {
          if (part.type === 'text') {
            return isUser ? (
              <PlainText key={index} text={part.text} />
            ) : (
              <Suspense key={index} fallback={<PlainText text={part.text} />}>
                <Markdown text={part.text} />
              </Suspense>
            )
          }
          if (part.type === 'file') {
            return (
              <p key={index} className="file-part">
                Attachment: {part.filename ?? part.mediaType}
              </p>
            )
          }
          if (isToolPart(part)) return <ToolCall key={index} part={part as unknown as ToolPartShape} />
          if (part.type === 'data-error') {
            const data = (part as { data?: { errorText?: string } }).data
            return (
              <div key={index} className="error-note">
                <p>The answer failed: {data?.errorText ?? 'unknown error'}</p>
              </div>
            )
          }
          return null
        })}
        {sources.length > 0 && (
          <div className="sources">
            <span className="sources-label">Sources:</span>
            <ul>
              {sources.map((source) => {
                const location = sourceLocation(source)
                return (
                  <li key={source.sourceId}>
                    {location ? (
                      <button
                        type="button"
                        className="chip"
                        data-testid="citation"
                        onClick={() =>
                          onCite({ ...location, fileName: source.filename ?? source.title })
                        }
                      >
                        {source.title}
                      </button>
                    ) : (
                      <span className="chip chip-static" data-testid="citation">
                        {source.title}
                      </span>
                    )}
                  </li>
                )
              })}
            </ul>
          </div>
        )}
      </div>
      {!isUser && text && (
        <div className="message-actions">
          <CopyButton label="Copy" getText={() => text} />
        </div>
      )}
    </article>
  )
}
