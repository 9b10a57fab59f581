// One knowledge base (/knowledge/:kbId): its files with live processing status, upload,
// search, and per file reprocess, delete, download, text and page images.
import { useId, useState } from 'react'
import { Link, useParams } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { ApiError } from '../api/client'
import { ErrorNote, errorMessage } from '../ui/ErrorNote'
import {
  deleteFile,
  downloadPart,
  kbKeys,
  listFiles,
  listKnowledgeBases,
  reprocessFile,
  saveBlob,
  updateKnowledgeBase,
} from './api'
import { FilePreview } from './FilePreview'
import {
  FILE_STATUS_HINTS,
  fileTypeLabel,
  formatBytes,
  formatDate,
  isFailed,
  isTerminal,
} from './format'
import { ConfirmDialog, KnowledgeBaseFormDialog, RowButton, StatusBadge } from './parts'
import { filesPollInterval, resetPolling } from './polling'
import { SearchPanel } from './SearchPanel'
import type { FileListResponse, KbFile, KnowledgeBase } from './types'
import { UploadPanel } from './UploadPanel'
import './knowledge.css'

export function KnowledgeBasePage() {
  const { kbId: raw } = useParams()
  const kbId = raw && /^[1-9][0-9]{0,15}$/.test(raw) ? Number(raw) : null
  if (kbId === null) {
    return (
      <div className="kb-page">
        <p>
          <Link to="/knowledge">Knowledge bases</Link>
        </p>
        <h1>Knowledge base not found</h1>
        <p>The address does not name a knowledge base.</p>
      </div>
    )
  }
  return <KnowledgeBaseView key={kbId} kbId={kbId} />
}

interface Preview {
  fileId: string
  fileName: string
  page: number | null
}

function KnowledgeBaseView({ kbId }: { kbId: number }) {
  const queryClient = useQueryClient()
  const kbs = useQuery({
    queryKey: kbKeys.all,
    queryFn: ({ signal }) => listKnowledgeBases(signal),
    refetchInterval: (query) =>
      query.state.data?.knowledgeBases.some(
        (kb) => kb.id === kbId && (kb.status === 'processing' || kb.status === 'reindexing'),
      )
        ? 5_000
        : false,
  })
  const files = useQuery({
    queryKey: kbKeys.files(kbId),
    queryFn: ({ signal }) => listFiles(kbId, signal),
    refetchInterval: (query) => filesPollInterval(kbId, query.state.data?.files),
    refetchIntervalInBackground: false,
    staleTime: 0,
  })
  const kb = kbs.data?.knowledgeBases.find((k) => k.id === kbId)

  const [editing, setEditing] = useState(false)
  const sectionId = useId()
  const update = useMutation({
    mutationFn: (values: { name: string; description: string }) =>
      updateKnowledgeBase({ kbId, ...values }),
    onSuccess: () => {
      setEditing(false)
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
    },
  })

  const filesNotFound = files.error instanceof ApiError && files.error.status === 404
  if (kbs.isPending && !kb) {
    return (
      <div className="kb-page">
        <p className="kb-muted" role="status">
          Loading the knowledge base…
        </p>
      </div>
    )
  }
  if ((kbs.isSuccess && !kb) || filesNotFound) {
    return (
      <div className="kb-page">
        <p>
          <Link to="/knowledge">← Knowledge bases</Link>
        </p>
        <h1>Knowledge base not found</h1>
        <p>It may have been deleted, or it belongs to another organization.</p>
      </div>
    )
  }

  return (
    <div className="kb-page">
      <nav aria-label="Breadcrumb" className="kb-breadcrumb">
        <Link to="/knowledge">Knowledge bases</Link>
        <span aria-hidden="true"> / </span>
        <span aria-current="page">{kb?.name ?? `#${kbId}`}</span>
      </nav>
      {kbs.isError && <ErrorNote error={kbs.error} />}
      <header className="kb-header">
        <div className="kb-header-text">
          <h1>{kb?.name ?? `Knowledge base ${kbId}`}</h1>
          {kb?.description && <p className="kb-description">{kb.description}</p>}
        </div>
        {kb && (
          <div className="kb-header-actions">
            <StatusBadge status={kb.status} kind="kb" />
            <button
              type="button"
              className="kb-btn"
              onClick={() => {
                update.reset()
                setEditing(true)
              }}
            >
              Edit
            </button>
          </div>
        )}
      </header>
      {kb && <KbFacts kb={kb} />}
      {kb && (
        <KnowledgeBaseFormDialog
          title="Edit knowledge base"
          open={editing}
          submitLabel="Save"
          initialName={kb.name}
          initialDescription={kb.description}
          busy={update.isPending}
          error={update.error}
          onSubmit={(values) => update.mutate(values)}
          onClose={() => setEditing(false)}
        />
      )}

      <section className="kb-section" aria-labelledby={`${sectionId}-upload`}>
        <h2 id={`${sectionId}-upload`}>Add files</h2>
        <UploadPanel
          kbId={kbId}
          files={files.data?.files}
          filesUpdatedAt={files.dataUpdatedAt}
          onUploaded={() => resetPolling(kbId)}
        />
      </section>

      <section className="kb-section">
        <h2>Search this knowledge base</h2>
        <SearchPanel kbIds={[kbId]} scopeText={`Passages of ${kb?.name ?? 'this knowledge base'}.`} />
      </section>

      <section className="kb-section" aria-labelledby={`${sectionId}-files`}>
        <h2 id={`${sectionId}-files`}>Files</h2>
        {files.isPending && <p className="kb-muted">Loading the files…</p>}
        {files.isError && <ErrorNote error={files.error} />}
        {files.data && <FileTable kbId={kbId} files={files.data.files} />}
      </section>
    </div>
  )
}

function KbFacts({ kb }: { kb: KnowledgeBase }) {
  return (
    <dl className="kb-facts">
      <div>
        <dt>Files</dt>
        <dd>{kb.fileCount}</dd>
      </div>
      <div>
        <dt>Total size</dt>
        <dd>{formatBytes(kb.totalSize)}</dd>
      </div>
      <div>
        <dt>Last upload</dt>
        <dd>{formatDate(kb.lastFileUploadedAt)}</dd>
      </div>
      <div>
        <dt>Embedding model</dt>
        <dd>
          <code>{kb.embeddingModel}</code> ({kb.embeddingDimensions} dimensions)
        </dd>
      </div>
      {kb.inboundEmailAddress && (
        <div>
          <dt>E-mail address</dt>
          <dd>
            <code>{kb.inboundEmailAddress}</code>
          </dd>
        </div>
      )}
    </dl>
  )
}

function FileTable({ kbId, files }: { kbId: number; files: KbFile[] }) {
  const queryClient = useQueryClient()
  const [filter, setFilter] = useState('')
  const [preview, setPreview] = useState<Preview | null>(null)
  const [confirmDelete, setConfirmDelete] = useState<KbFile | null>(null)
  const [downloading, setDownloading] = useState<ReadonlySet<string>>(new Set())
  const [actionError, setActionError] = useState<unknown>(null)
  const [notice, setNotice] = useState('')
  const filterId = useId()
  const baseId = useId()

  const patchFile = (fileId: string, patch: Partial<KbFile>) =>
    queryClient.setQueryData<FileListResponse>(kbKeys.files(kbId), (old) =>
      old ? { ...old, files: old.files.map((f) => (f.fileId === fileId ? { ...f, ...patch } : f)) } : old,
    )

  const reprocess = useMutation({
    mutationFn: (file: KbFile) => reprocessFile(kbId, file.fileId),
    onMutate: () => setActionError(null),
    onSuccess: (_data, file) => {
      patchFile(file.fileId, { processingStatus: 'parsing', processingError: null })
      setNotice(`Reprocessing ${file.fileName}.`)
      resetPolling(kbId)
      void queryClient.invalidateQueries({ queryKey: kbKeys.files(kbId) })
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
    },
    onError: (error) => setActionError(error),
  })

  const remove = useMutation({
    mutationFn: (file: KbFile) => deleteFile(kbId, file.fileId),
    onSuccess: (data, file) => {
      setConfirmDelete(null)
      queryClient.setQueryData<FileListResponse>(kbKeys.files(kbId), (old) =>
        old ? { ...old, files: old.files.filter((f) => f.fileId !== file.fileId) } : old,
      )
      setNotice(data?.message ?? `Deleted ${file.fileName}.`)
      void queryClient.invalidateQueries({ queryKey: kbKeys.files(kbId) })
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
    },
  })

  async function download(file: KbFile) {
    setActionError(null)
    setDownloading((s) => new Set(s).add(file.fileId))
    try {
      const blob = await downloadPart(kbId, file.fileId, 'original')
      saveBlob(blob, file.fileName)
      setNotice(`Downloaded ${file.fileName}.`)
    } catch (error) {
      setActionError(new Error(`Could not download ${file.fileName}: ${errorMessage(error)}`))
    } finally {
      setDownloading((s) => {
        const next = new Set(s)
        next.delete(file.fileId)
        return next
      })
    }
  }

  const needle = filter.trim().toLowerCase()
  const shown = needle ? files.filter((f) => f.fileName.toLowerCase().includes(needle)) : files
  const moving = files.filter((f) => !isTerminal(f.processingStatus)).length
  const failed = files.filter((f) => isFailed(f.processingStatus)).length
  const summary =
    files.length === 0
      ? 'No files yet.'
      : `${files.length} file${files.length === 1 ? '' : 's'}` +
        (moving ? `, ${moving} processing` : '') +
        (failed ? `, ${failed} failed` : '') +
        '.'

  return (
    <div className="kb-files">
      <div className="kb-files-toolbar">
        <p className="kb-muted" role="status" aria-live="polite">
          {summary}
        </p>
        {files.length > 5 && (
          <div className="kb-field kb-filter">
            <label htmlFor={filterId}>Filter files</label>
            <input
              id={filterId}
              type="text"
              value={filter}
              onChange={(e) => setFilter(e.target.value)}
              autoComplete="off"
            />
          </div>
        )}
      </div>
      <p className="visually-hidden" aria-live="polite">
        {notice}
      </p>
      <ErrorNote error={actionError} />
      {files.length === 0 ? (
        <p className="kb-empty">Upload files above to make them searchable.</p>
      ) : (
        <div className="kb-table-wrap" role="region" aria-label="Files table" tabIndex={0}>
          <table className="kb-table kb-files-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Type</th>
                <th scope="col">Size</th>
                <th scope="col">Pages</th>
                <th scope="col">Added</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {shown.map((file) => {
                const nameId = `${baseId}-name-${file.id}`
                const statusId = `${baseId}-status-${file.id}`
                const pages = file.imageKeys?.length ?? 0
                const busyDownloading = downloading.has(file.fileId)
                const reprocessing = reprocess.isPending && reprocess.variables?.fileId === file.fileId
                return (
                  <tr key={file.fileId} data-file-name={file.fileName} data-file-id={file.fileId}>
                    <td data-label="Name" className="kb-cell-name">
                      <span id={nameId} className="kb-file-name">
                        {file.fileName}
                      </span>
                    </td>
                    <td data-label="Status" className="kb-cell-status">
                      <StatusBadge status={file.processingStatus} kind="file" id={statusId} />
                      <span className="visually-hidden">
                        {' '}
                        {FILE_STATUS_HINTS[file.processingStatus] ?? ''}
                      </span>
                      {file.processingError && (
                        <p className="kb-file-error" data-processing-error="">
                          {file.processingError}
                        </p>
                      )}
                    </td>
                    <td data-label="Type">{fileTypeLabel(file.contentType, file.fileName)}</td>
                    <td data-label="Size">{formatBytes(file.fileSize)}</td>
                    <td data-label="Pages">
                      {pages > 0 ? pages : '—'}
                      {file.ocrPages ? (
                        <span className="kb-muted"> ({file.ocrPages} by OCR)</span>
                      ) : null}
                    </td>
                    <td data-label="Added" className="kb-cell-date">{formatDate(file.createdAt)}</td>
                    <td className="kb-cell-actions">
                      <div className="kb-row-actions">
                        <RowButton
                          describedBy={nameId}
                          onClick={() => setPreview({ fileId: file.fileId, fileName: file.fileName, page: null })}
                          disabled={file.processingStatus === 'parsing'}
                        >
                          View text
                        </RowButton>
                        {pages > 0 && (
                          <RowButton
                            describedBy={nameId}
                            onClick={() => setPreview({ fileId: file.fileId, fileName: file.fileName, page: 1 })}
                          >
                            View pages
                          </RowButton>
                        )}
                        <RowButton
                          describedBy={nameId}
                          onClick={() => void download(file)}
                          disabled={busyDownloading}
                          busy={busyDownloading}
                        >
                          Download
                        </RowButton>
                        <RowButton
                          describedBy={nameId}
                          onClick={() => reprocess.mutate(file)}
                          disabled={reprocessing}
                          busy={reprocessing}
                        >
                          Reprocess
                        </RowButton>
                        <RowButton
                          describedBy={nameId}
                          danger
                          onClick={() => {
                            remove.reset()
                            setConfirmDelete(file)
                          }}
                        >
                          Delete
                        </RowButton>
                      </div>
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
          {shown.length === 0 && <p className="kb-empty">No file name contains “{filter}”.</p>}
        </div>
      )}
      <ConfirmDialog
        title="Delete file"
        open={confirmDelete !== null}
        confirmLabel="Delete"
        busy={remove.isPending}
        error={remove.error}
        onConfirm={() => {
          if (confirmDelete) remove.mutate(confirmDelete)
        }}
        onClose={() => setConfirmDelete(null)}
      >
        <p>
          Delete <strong>{confirmDelete?.fileName}</strong>? Its passages and stored copies are
          removed; agents will no longer find it.
        </p>
      </ConfirmDialog>
      {preview && (
        <FilePreview
          kbId={kbId}
          fileId={preview.fileId}
          fileName={preview.fileName}
          page={preview.page}
          onClose={() => setPreview(null)}
        />
      )}
    </div>
  )
}
