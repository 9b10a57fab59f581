// The upload queue of one knowledge base: presign → PUT with progress → associate, at most
// three files at a time. It lives outside React (one per knowledge base for the whole
// session) so uploads go on while the user looks at another page; components read it with
// useSyncExternalStore.
import { subscribeIdentity } from '../auth/store'
import { errorMessage } from '../ui/ErrorNote'
import { associateFile, presignUpload } from './api'
import { contentTypeOf } from './format'

export const MAX_PARALLEL_UPLOADS = 3

export type UploadState = 'queued' | 'uploading' | 'associating' | 'processing' | 'failed' | 'cancelled'

export interface UploadItem {
  key: string
  name: string
  size: number
  contentType: string
  state: UploadState
  /** Bytes sent so far (upload step 2). */
  loaded: number
  error?: string
  /** The file's uuid once presigned. */
  fileId?: string
  /** When the file was associated with the knowledge base (ms since the epoch). */
  associatedAt?: number
}

/** Headers the browser sets itself and refuses from scripts. */
const FORBIDDEN_HEADERS = new Set(['content-length', 'host', 'connection', 'accept-encoding'])

let counter = 0

function putWithProgress(
  url: string,
  method: string,
  headers: Record<string, string>,
  file: File,
  onProgress: (loaded: number) => void,
  onXhr: (xhr: XMLHttpRequest) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest()
    onXhr(xhr)
    xhr.open(method || 'PUT', url)
    for (const [name, value] of Object.entries(headers)) {
      if (!FORBIDDEN_HEADERS.has(name.toLowerCase())) xhr.setRequestHeader(name, value)
    }
    xhr.upload.onprogress = (event) => {
      if (event.lengthComputable) onProgress(event.loaded)
    }
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        onProgress(file.size)
        resolve()
        return
      }
      let body: unknown
      try {
        body = xhr.responseText ? (JSON.parse(xhr.responseText) as unknown) : undefined
      } catch {
        body = xhr.responseText
      }
      const message =
        body && typeof body === 'object' && typeof (body as { error?: unknown }).error === 'string'
          ? (body as { error: string }).error
          : `The upload failed (HTTP ${xhr.status}).`
      reject(new Error(message))
    }
    xhr.onerror = () =>
      reject(new Error('The upload failed: the storage could not be reached.'))
    xhr.onabort = () => reject(new Error('Upload cancelled.'))
    xhr.send(file)
  })
}

export class UploadQueue {
  private items: UploadItem[] = []
  private files = new Map<string, File>()
  private requests = new Map<string, XMLHttpRequest>()
  private cancelling = new Set<string>()
  private active = 0
  /** Dropped (another person signed in): nothing more is sent or shown. */
  private disposed = false
  private listeners = new Set<() => void>()
  private readonly kbId: number
  private readonly onAssociated: () => void

  constructor(kbId: number, onAssociated: () => void) {
    this.kbId = kbId
    this.onAssociated = onAssociated
  }

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener)
    return () => {
      this.listeners.delete(listener)
    }
  }

  getSnapshot = (): UploadItem[] => this.items

  add(files: Iterable<File>): void {
    const added: UploadItem[] = []
    for (const file of files) {
      counter += 1
      const key = `u${counter}`
      this.files.set(key, file)
      added.push({
        key,
        name: file.name,
        size: file.size,
        contentType: contentTypeOf(file),
        state: 'queued',
        loaded: 0,
      })
    }
    if (added.length === 0) return
    this.items = [...added, ...this.items]
    this.emit()
    this.pump()
  }

  retry(key: string): void {
    const item = this.items.find((i) => i.key === key)
    if (!item || (item.state !== 'failed' && item.state !== 'cancelled') || !this.files.has(key)) {
      return
    }
    this.cancelling.delete(key)
    this.update(key, { state: 'queued', loaded: 0, error: undefined, fileId: undefined })
    this.pump()
  }

  cancel(key: string): void {
    const item = this.items.find((i) => i.key === key)
    if (!item) return
    if (item.state === 'queued') {
      this.update(key, { state: 'cancelled', error: 'Upload cancelled.' })
    } else if (item.state === 'uploading') {
      // Also while the upload is being presigned (no request yet): run() checks before each step.
      this.cancelling.add(key)
      this.requests.get(key)?.abort()
    }
  }

  /** Stops everything (the uploads in flight are aborted) and forgets every item. */
  dispose(): void {
    this.disposed = true
    for (const xhr of this.requests.values()) xhr.abort()
    this.requests.clear()
    this.items = []
    this.files.clear()
    this.cancelling.clear()
    this.emit()
  }

  /** Forgets an item that is no longer moving (failed, cancelled, or handed to processing). */
  dismiss(key: string): void {
    const item = this.items.find((i) => i.key === key)
    if (!item || item.state === 'uploading' || item.state === 'associating') return
    if (item.state === 'queued') return
    this.items = this.items.filter((i) => i.key !== key)
    this.files.delete(key)
    this.emit()
  }

  dismissAll(keys: string[]): void {
    const drop = new Set(keys)
    const before = this.items.length
    this.items = this.items.filter(
      (i) => !drop.has(i.key) || i.state === 'uploading' || i.state === 'associating' || i.state === 'queued',
    )
    for (const key of keys) if (!this.items.some((i) => i.key === key)) this.files.delete(key)
    if (this.items.length !== before) this.emit()
  }

  private emit(): void {
    for (const listener of this.listeners) listener()
  }

  private update(key: string, patch: Partial<UploadItem>): void {
    if (this.disposed) return
    this.items = this.items.map((i) => (i.key === key ? { ...i, ...patch } : i))
    this.emit()
  }

  private pump(): void {
    while (!this.disposed && this.active < MAX_PARALLEL_UPLOADS) {
      // Oldest queued first (items are kept newest first).
      const next = [...this.items].reverse().find((i) => i.state === 'queued')
      if (!next) return
      this.active += 1
      this.update(next.key, { state: 'uploading', loaded: 0 })
      void this.run(next.key).finally(() => {
        this.active -= 1
        this.pump()
      })
    }
  }

  private async run(key: string): Promise<void> {
    const file = this.files.get(key)
    const item = this.items.find((i) => i.key === key)
    if (!file || !item) return
    try {
      const signed = await presignUpload({
        fileName: file.name,
        contentType: item.contentType,
        fileSize: file.size,
      })
      this.throwIfStopped(key)
      this.update(key, { fileId: signed.fileId })
      let lastPercent = -1
      await putWithProgress(
        signed.uploadUrl,
        signed.method,
        signed.headers ?? {},
        file,
        (loaded) => {
          // Re-render at most once per percent.
          const percent = file.size ? Math.floor((loaded / file.size) * 100) : 100
          if (percent === lastPercent) return
          lastPercent = percent
          this.update(key, { loaded })
        },
        (xhr) => this.requests.set(key, xhr),
      )
      this.requests.delete(key)
      this.throwIfStopped(key)
      this.update(key, { state: 'associating', loaded: file.size })
      await associateFile({
        kbId: this.kbId,
        fileId: signed.fileId,
        fileName: file.name,
        fileKey: signed.fileKey,
        contentKey: signed.contentKey,
        contentType: item.contentType,
        fileSize: file.size,
      })
      if (this.disposed) return
      this.update(key, { state: 'processing', associatedAt: Date.now() })
      this.files.delete(key)
      this.onAssociated()
    } catch (error) {
      if (this.disposed) return
      this.requests.delete(key)
      const cancelled = this.cancelling.delete(key)
      this.update(key, {
        state: cancelled ? 'cancelled' : 'failed',
        error: errorMessage(error),
      })
    }
  }

  /** A cancel (or the queue's end) that came while no request could be aborted. */
  private throwIfStopped(key: string): void {
    if (this.disposed || this.cancelling.has(key)) throw new Error('Upload cancelled.')
  }
}

const queues = new Map<number, UploadQueue>()

// Another person signed in (or nobody is): their uploads stop and their rows go.
subscribeIdentity(() => {
  for (const queue of queues.values()) queue.dispose()
  queues.clear()
})

/** The session's upload queue of one knowledge base. */
export function uploadQueueFor(kbId: number, onAssociated: () => void): UploadQueue {
  let queue = queues.get(kbId)
  if (!queue) {
    queue = new UploadQueue(kbId, onAssociated)
    queues.set(kbId, queue)
  }
  return queue
}
