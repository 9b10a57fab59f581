// Upload several files at once: a drop zone that is also a button opening the picker,
// the "Choose files" input, and a progress bar and state per file.
import { useId, useState, useSyncExternalStore, type DragEvent } from 'react'
import { useQueryClient } from '@tanstack/react-query'
import { kbKeys } from './api'
import { formatBytes, isFailed, isTerminal } from './format'
import type { KbFile } from './types'
import { uploadQueueFor, type UploadItem } from './upload'
import './knowledge.css'

type Shown = 'queued' | 'uploading' | 'processing' | 'done' | 'failed' | 'cancelled' | 'removed'

interface Row {
  item: UploadItem
  shown: Shown
  message?: string
}

/** What an upload has become: its own state, then its file's processing state. */
function rowOf(item: UploadItem, files: KbFile[] | undefined, filesUpdatedAt: number): Row {
  switch (item.state) {
    case 'queued':
      return { item, shown: 'queued' }
    case 'uploading':
    case 'associating':
      return { item, shown: 'uploading' }
    case 'failed':
      return { item, shown: 'failed', message: item.error }
    case 'cancelled':
      return { item, shown: 'cancelled', message: item.error }
    case 'processing': {
      const file = files?.find((f) => f.fileId === item.fileId)
      if (!file) {
        // Not listed by a listing fetched after the association: deleted since.
        const listedSince = files !== undefined && filesUpdatedAt > (item.associatedAt ?? Infinity)
        return { item, shown: listedSince ? 'removed' : 'processing' }
      }
      if (!isTerminal(file.processingStatus)) return { item, shown: 'processing' }
      if (isFailed(file.processingStatus)) {
        return { item, shown: 'failed', message: file.processingError ?? 'Processing failed.' }
      }
      return { item, shown: 'done' }
    }
  }
}

const FINISHED: ReadonlySet<Shown> = new Set<Shown>(['done', 'failed', 'cancelled', 'removed'])

const SHOWN_LABELS: Record<Shown, string> = {
  queued: 'Waiting',
  uploading: 'Uploading',
  processing: 'Processing',
  done: 'Done',
  failed: 'Failed',
  cancelled: 'Cancelled',
  removed: 'Removed',
}

export function UploadPanel(props: {
  kbId: number
  files: KbFile[] | undefined
  /** When `files` was fetched (react-query's dataUpdatedAt). */
  filesUpdatedAt: number
  onUploaded: () => void
}) {
  const { kbId, files, filesUpdatedAt, onUploaded } = props
  const queryClient = useQueryClient()
  const [queue] = useState(() =>
    uploadQueueFor(kbId, () => {
      void queryClient.invalidateQueries({ queryKey: kbKeys.files(kbId) })
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
      onUploaded()
    }),
  )
  const items = useSyncExternalStore(queue.subscribe, queue.getSnapshot, queue.getSnapshot)
  const [dragging, setDragging] = useState(false)
  const [inputEl, setInputEl] = useState<HTMLInputElement | null>(null)
  const inputId = useId()
  const hintId = useId()

  const rows = items.map((item) => rowOf(item, files, filesUpdatedAt))
  const counts = { uploading: 0, queued: 0, processing: 0, done: 0, failed: 0 }
  for (const row of rows) {
    if (row.shown === 'uploading') counts.uploading += 1
    else if (row.shown === 'queued') counts.queued += 1
    else if (row.shown === 'processing') counts.processing += 1
    else if (row.shown === 'done') counts.done += 1
    else if (row.shown === 'failed') counts.failed += 1
  }
  // Milestones only (counts change), never a percentage.
  const summary = rows.length
    ? [
        counts.uploading + counts.queued > 0 &&
          `Uploading ${counts.uploading + counts.queued} file${counts.uploading + counts.queued === 1 ? '' : 's'}`,
        counts.processing > 0 && `${counts.processing} processing`,
        counts.done > 0 && `${counts.done} done`,
        counts.failed > 0 && `${counts.failed} failed`,
      ]
        .filter(Boolean)
        .join(', ') + '.'
    : ''
  const failures = rows
    .filter((r) => r.shown === 'failed')
    .map((r) => `${r.item.name} failed: ${r.message ?? ''}`)
    .join(' ')
  const finished = rows.filter((r) => FINISHED.has(r.shown))

  function addFiles(list: FileList | null) {
    if (list && list.length > 0) queue.add(Array.from(list))
  }

  function onDrop(event: DragEvent) {
    event.preventDefault()
    setDragging(false)
    addFiles(event.dataTransfer.files)
  }

  function onDragOver(event: DragEvent) {
    if (!event.dataTransfer.types.includes('Files')) return
    event.preventDefault()
    event.dataTransfer.dropEffect = 'copy'
    if (!dragging) setDragging(true)
  }

  return (
    <div className="kb-upload">
      <div
        className={dragging ? 'kb-dropzone kb-dropzone-active' : 'kb-dropzone'}
        onDragOver={onDragOver}
        onDragEnter={onDragOver}
        onDragLeave={(event) => {
          if (!event.currentTarget.contains(event.relatedTarget as Node | null)) setDragging(false)
        }}
        onDrop={onDrop}
        data-testid="upload-dropzone"
      >
        <button
          type="button"
          className="kb-dropzone-button"
          onClick={() => inputEl?.click()}
          aria-describedby={hintId}
        >
          <span className="kb-dropzone-title">Upload files</span>
          <span className="kb-dropzone-sub">Drop files here, or press to pick them</span>
        </button>
        <label htmlFor={inputId} className="visually-hidden">
          Choose files
        </label>
        <input
          ref={setInputEl}
          id={inputId}
          type="file"
          multiple
          className="visually-hidden"
          tabIndex={-1}
          onChange={(event) => {
            addFiles(event.target.files)
            event.target.value = ''
          }}
        />
        <p id={hintId} className="kb-muted kb-dropzone-hint">
          PDF, Word, PowerPoint, Excel, text, Markdown, HTML, e-mail and images; several at once.
        </p>
      </div>

      <p className="visually-hidden" aria-live="polite" role="status">
        {summary} {failures}
      </p>

      {rows.length > 0 && (
        <div className="kb-upload-list-wrap">
          <div className="kb-upload-list-head">
            <p className="kb-muted" aria-hidden="true">
              {summary}
            </p>
            {finished.length > 0 && (
              <button
                type="button"
                className="kb-btn kb-btn-small"
                onClick={() => queue.dismissAll(finished.map((r) => r.item.key))}
              >
                Clear finished uploads
              </button>
            )}
          </div>
          <ul className="kb-upload-list">
            {rows.map((row) => (
              <UploadRow
                key={row.item.key}
                row={row}
                onCancel={() => queue.cancel(row.item.key)}
                onRetry={() => queue.retry(row.item.key)}
                onDismiss={() => queue.dismiss(row.item.key)}
              />
            ))}
          </ul>
        </div>
      )}
    </div>
  )
}

function UploadRow(props: { row: Row; onCancel: () => void; onRetry: () => void; onDismiss: () => void }) {
  const { row, onCancel, onRetry, onDismiss } = props
  const { item, shown, message } = row
  const progressId = useId()
  const percent = item.size ? Math.round((item.loaded / item.size) * 100) : shown === 'queued' ? 0 : 100
  const complete = shown === 'processing' || shown === 'done' || shown === 'removed'
  return (
    <li className={`kb-upload-item kb-upload-${shown}`} data-upload-name={item.name} data-upload-state={shown}>
      <div className="kb-upload-line">
        <label htmlFor={progressId} className="kb-upload-name">
          {item.name}
        </label>
        <span className="kb-upload-size">{formatBytes(item.size)}</span>
        <span className="kb-upload-state">
          {SHOWN_LABELS[shown]}
          {shown === 'uploading' && item.state === 'uploading' && ` ${percent}%`}
        </span>
      </div>
      <progress
        id={progressId}
        max={100}
        value={complete ? 100 : shown === 'uploading' ? percent : shown === 'queued' ? 0 : percent}
      />
      {message && (shown === 'failed' || shown === 'cancelled') && (
        <p className="kb-upload-error">{message}</p>
      )}
      <div className="kb-upload-actions">
        {(shown === 'queued' || (shown === 'uploading' && item.state === 'uploading')) && (
          <button type="button" className="kb-btn kb-btn-small" onClick={onCancel} aria-label={`Cancel upload of ${item.name}`}>
            Cancel
          </button>
        )}
        {(item.state === 'failed' || item.state === 'cancelled') && (
          <button type="button" className="kb-btn kb-btn-small" onClick={onRetry} aria-label={`Retry upload of ${item.name}`}>
            Retry
          </button>
        )}
        {FINISHED.has(shown) && (
          <button type="button" className="kb-btn kb-btn-small" onClick={onDismiss} aria-label={`Dismiss ${item.name}`}>
            Dismiss
          </button>
        )}
      </div>
    </li>
  )
}
