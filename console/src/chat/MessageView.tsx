import { lazy, Suspense } from 'react'
import type { UIMessage } from 'ai'
import { CopyButton } from '../ui/CopyButton'
import { rawText, sourceLocation, type SourceLocation } from './parts'
import { ToolCall, type Decisions, type ToolPartShape } from './ToolCall'

const Markdown = lazy(() => import('./Markdown'))

type Part = UIMessage['parts'][number]

export interface CitationTarget extends SourceLocation {
  fileName: string
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
  decisions,
}: {
  message: UIMessage
  onCite: (target: CitationTarget) => void
  /** The decision controls of its calls waiting for approval (none: not shown). */
  decisions?: Decisions
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
          if (isToolPart(part))
            return <ToolCall key={index} part={part as unknown as ToolPartShape} decisions={decisions} />
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
