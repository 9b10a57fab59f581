// A file's page image (with previous/next page) or its extracted text, in a Dialog.
// Used by the knowledge pages and by the chat's citations.
import { useCallback, useState } from 'react'
import { useQuery } from '@tanstack/react-query'
import { ApiError } from '../api/client'
import { Dialog } from '../ui/Dialog'
import { ErrorNote } from '../ui/ErrorNote'
import { downloadPart, kbKeys, listFiles } from './api'
import './knowledge.css'

/** Shown whole up to this many characters; longer text is cut with a note. */
const MAX_SHOWN_TEXT = 500_000

export function FilePreview(props: {
  kbId: number
  fileId: string
  fileName: string
  page?: number | null
  onClose: () => void
}) {
  const { kbId, fileId, fileName, onClose } = props
  const startPage = props.page && props.page > 0 ? Math.floor(props.page) : null
  // The mode and page are the reader's once the dialog is open; the props only start them.
  const [page, setPage] = useState<number | null>(startPage)
  const [lastPage, setLastPage] = useState<number | null>(startPage)

  // The file's record gives the page count (imageKeys) when the list is at hand or cheap.
  const files = useQuery({
    queryKey: kbKeys.files(kbId),
    queryFn: ({ signal }) => listFiles(kbId, signal),
    staleTime: 30_000,
    retry: false,
  })
  const file = files.data?.files.find((f) => f.fileId === fileId)
  const pageCount = file?.imageKeys?.length ?? null
  const hasPages = pageCount === null ? startPage !== null : pageCount > 0
  // A cited page of a file without page images (text, Markdown, Word) shows the text.
  const mode: 'image' | 'text' = page !== null && pageCount !== 0 ? 'image' : 'text'

  const title = mode === 'image' ? `${fileName} — page ${page ?? ''}` : `${fileName} — text`

  return (
    <Dialog title={title} open onClose={onClose} wide>
      <div className="kb-preview">
        <div className="kb-preview-toolbar" role="group" aria-label="View">
          {mode === 'image' ? (
            <button type="button" className="kb-btn" onClick={() => setPage(null)}>
              Show text
            </button>
          ) : (
            hasPages && (
              <button type="button" className="kb-btn" onClick={() => setPage(lastPage ?? 1)}>
                Show page images
              </button>
            )
          )}
        </div>
        {mode === 'image' && page !== null ? (
          <PageImage
            kbId={kbId}
            fileId={fileId}
            fileName={fileName}
            page={page}
            pageCount={pageCount}
            onPage={(p) => {
              setPage(p)
              setLastPage(p)
            }}
          />
        ) : (
          <ExtractedText kbId={kbId} fileId={fileId} fileName={fileName} />
        )}
      </div>
    </Dialog>
  )
}

/** A ref callback that shows a blob in an <img> through an object URL, revoked on detach. */
function useBlobSource(blob: Blob | undefined) {
  return useCallback(
    (img: HTMLImageElement | null) => {
      if (!img || !blob) return
      const url = URL.createObjectURL(blob)
      img.src = url
      return () => {
        img.removeAttribute('src')
        URL.revokeObjectURL(url)
      }
    },
    [blob],
  )
}

function PageImage(props: {
  kbId: number
  fileId: string
  fileName: string
  page: number
  pageCount: number | null
  onPage: (page: number) => void
}) {
  const { kbId, fileId, fileName, page, pageCount, onPage } = props
  const image = useQuery({
    queryKey: ['kbFilePart', kbId, fileId, 'image', page],
    queryFn: () => downloadPart(kbId, fileId, 'image', page),
    staleTime: 60_000,
    gcTime: 60_000,
    retry: false,
  })
  const imageRef = useBlobSource(image.data)
  const notFound = image.error instanceof ApiError && image.error.status === 404
  const atEnd = (pageCount !== null && page >= pageCount) || notFound
  const position = pageCount ? `Page ${page} of ${pageCount}` : `Page ${page}`

  return (
    <div className="kb-preview-pages">
      <div className="kb-pager">
        <button
          type="button"
          className="kb-btn"
          onClick={() => onPage(page - 1)}
          disabled={page <= 1}
        >
          Previous page
        </button>
        <span className="kb-pager-position" aria-live="polite">
          {position}
        </span>
        <button type="button" className="kb-btn" onClick={() => onPage(page + 1)} disabled={atEnd}>
          Next page
        </button>
      </div>
      <div className="kb-preview-frame">
        {image.isPending && <p className="kb-muted">Loading page {page}…</p>}
        {image.isError && <ErrorNote error={image.error} />}
        {image.data && (
          <img ref={imageRef} className="kb-page-image" alt={`Page ${page} of ${fileName}`} />
        )}
      </div>
    </div>
  )
}

function ExtractedText(props: { kbId: number; fileId: string; fileName: string }) {
  const { kbId, fileId, fileName } = props
  const text = useQuery({
    queryKey: ['kbFilePart', kbId, fileId, 'content'],
    queryFn: async () => (await downloadPart(kbId, fileId, 'content')).text(),
    staleTime: 60_000,
    gcTime: 60_000,
    retry: false,
  })
  if (text.isPending) return <p className="kb-muted">Loading the text…</p>
  if (text.isError) return <ErrorNote error={text.error} />
  const whole = text.data
  const shown = whole.length > MAX_SHOWN_TEXT ? whole.slice(0, MAX_SHOWN_TEXT) : whole
  return (
    <div className="kb-preview-text">
      {whole.trim() === '' ? (
        <p className="kb-muted">No text was extracted from {fileName}.</p>
      ) : (
        <pre tabIndex={0} aria-label={`Text of ${fileName}`}>
          {shown}
        </pre>
      )}
      {shown.length < whole.length && (
        <p className="kb-muted">
          Showing the first {MAX_SHOWN_TEXT.toLocaleString()} of {whole.length.toLocaleString()}{' '}
          characters. Download the file for the rest.
        </p>
      )}
    </div>
  )
}
