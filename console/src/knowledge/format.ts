// Labels and number formatting shared by the knowledge pages.

const FILE_STATUS_LABELS: Record<string, string> = {
  parsing: 'Parsing',
  parsed: 'Parsed',
  chunking: 'Chunking',
  completed: 'Completed',
  parse_failed: 'Parse failed',
  chunk_failed: 'Chunk failed',
  extract_failed: 'Extraction failed',
}

/** What each state means, for the status' description. */
export const FILE_STATUS_HINTS: Record<string, string> = {
  parsing: 'Reading the text and page images',
  parsed: 'Read; waiting to be split into passages',
  chunking: 'Splitting into passages and computing embeddings',
  completed: 'Searchable',
  parse_failed: 'The file could not be read (corrupt, encrypted or unsupported)',
  chunk_failed: 'Splitting or embedding failed',
  extract_failed: 'Structured extraction failed',
}

const KB_STATUS_LABELS: Record<string, string> = {
  ready: 'Ready',
  processing: 'Processing',
  reindexing: 'Reindexing',
  error: 'Error',
}

export const TERMINAL_STATUSES: ReadonlySet<string> = new Set([
  'completed',
  'parse_failed',
  'chunk_failed',
  'extract_failed',
])

export function isTerminal(status: string): boolean {
  return TERMINAL_STATUSES.has(status)
}

export function isFailed(status: string): boolean {
  return status.endsWith('_failed')
}

export function fileStatusLabel(status: string): string {
  return FILE_STATUS_LABELS[status] ?? status
}

export function kbStatusLabel(status: string): string {
  return KB_STATUS_LABELS[status] ?? status
}

/** A tone for the status badge: ok, busy or bad. */
export function statusTone(status: string): 'ok' | 'busy' | 'bad' {
  if (status === 'completed' || status === 'ready') return 'ok'
  if (status === 'error' || isFailed(status)) return 'bad'
  return 'busy'
}

const UNITS = ['KB', 'MB', 'GB', 'TB']

export function formatBytes(bytes: number | null | undefined): string {
  if (bytes === null || bytes === undefined || !Number.isFinite(bytes)) return '—'
  if (bytes < 1024) return `${bytes} B`
  let value = bytes / 1024
  let unit = 0
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024
    unit += 1
  }
  return `${value >= 10 ? value.toFixed(0) : value.toFixed(1)} ${UNITS[unit]}`
}

const dateFormat = new Intl.DateTimeFormat(undefined, {
  dateStyle: 'medium',
  timeStyle: 'short',
})

export function formatDate(iso: string | null | undefined): string {
  if (!iso) return '—'
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return dateFormat.format(date)
}

/** A short readable type for a MIME type: "PDF", "Word", "text/plain" → "Text". */
export function fileTypeLabel(contentType: string, fileName: string): string {
  const type = contentType.split(';')[0].trim().toLowerCase()
  const known: Record<string, string> = {
    'application/pdf': 'PDF',
    'text/plain': 'Text',
    'text/markdown': 'Markdown',
    'text/html': 'HTML',
    'text/csv': 'CSV',
    'application/json': 'JSON',
    'message/rfc822': 'E-mail',
    'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'Word',
    'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet': 'Excel',
    'application/vnd.openxmlformats-officedocument.presentationml.presentation': 'PowerPoint',
  }
  if (known[type]) return known[type]
  if (type.startsWith('image/')) return `Image (${type.slice(6).toUpperCase()})`
  const dot = fileName.lastIndexOf('.')
  if (dot > 0 && dot < fileName.length - 1) return fileName.slice(dot + 1).toUpperCase()
  return type || 'Unknown'
}

/** The content type to declare for a picked file: the browser's, else one from the extension. */
export function contentTypeOf(file: File): string {
  if (file.type) return file.type
  const ext = file.name.toLowerCase().split('.').pop() ?? ''
  const byExt: Record<string, string> = {
    md: 'text/markdown',
    markdown: 'text/markdown',
    txt: 'text/plain',
    csv: 'text/csv',
    json: 'application/json',
    pdf: 'application/pdf',
    html: 'text/html',
    htm: 'text/html',
    eml: 'message/rfc822',
    docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
    xlsx: 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
    pptx: 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
    png: 'image/png',
    jpg: 'image/jpeg',
    jpeg: 'image/jpeg',
    tif: 'image/tiff',
    tiff: 'image/tiff',
  }
  return byExt[ext] ?? 'application/octet-stream'
}
