// Polite polling of a knowledge base's files: every ~2 s while something moves, backing off
// to ~10 s when nothing changes, stopped once every file is in a terminal state. (Paused
// while the tab is hidden by react-query's refetchIntervalInBackground: false.)
import { isTerminal } from './format'
import type { KbFile } from './types'

interface Tracker {
  signature: string
  changedAt: number
}

const trackers = new Map<number, Tracker>()

/** Starts the fast pace again (after an upload or a reprocess). */
export function resetPolling(kbId: number): void {
  trackers.set(kbId, { signature: '', changedAt: Date.now() })
}

export function filesPollInterval(kbId: number, files: KbFile[] | undefined): number | false {
  if (!files || files.every((f) => isTerminal(f.processingStatus))) {
    trackers.delete(kbId)
    return false
  }
  const signature = files.map((f) => `${f.fileId}:${f.processingStatus}`).join(',')
  const now = Date.now()
  let tracker = trackers.get(kbId)
  if (!tracker || tracker.signature !== signature) {
    tracker = { signature, changedAt: now }
    trackers.set(kbId, tracker)
  }
  const quiet = now - tracker.changedAt
  if (quiet < 10_000) return 2_000
  if (quiet < 30_000) return 4_000
  if (quiet < 60_000) return 7_000
  return 10_000
}
