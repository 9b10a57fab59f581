// Calls of the knowledge-base, file, upload and search endpoints, and their query keys.
import { api, apiBlob } from '../api/client'
import type {
  FileListResponse,
  FileResponse,
  KnowledgeBaseListResponse,
  KnowledgeBaseResponse,
  MessageResponse,
  PresignResponse,
  SearchResponse,
} from './types'

export const kbKeys = {
  /** The list of GET /kb/manage (kept apart from the files so invalidating one spares the other). */
  all: ['knowledgeBases', 'list'] as const,
  files: (kbId: number) => ['knowledgeBaseFiles', kbId] as const,
}

export function listKnowledgeBases(signal?: AbortSignal): Promise<KnowledgeBaseListResponse> {
  return api<KnowledgeBaseListResponse>('/kb/manage', { signal })
}

export function createKnowledgeBase(body: {
  name: string
  description?: string
}): Promise<KnowledgeBaseResponse> {
  return api<KnowledgeBaseResponse>('/kb/manage', { method: 'POST', body })
}

export function updateKnowledgeBase(body: {
  kbId: number
  name: string
  description: string
}): Promise<KnowledgeBaseResponse> {
  return api<KnowledgeBaseResponse>('/kb/manage', { method: 'PATCH', body })
}

export function deleteKnowledgeBase(kbId: number): Promise<MessageResponse> {
  return api<MessageResponse>('/kb/manage', { method: 'DELETE', query: { kbId } })
}

export function listFiles(kbId: number, signal?: AbortSignal): Promise<FileListResponse> {
  return api<FileListResponse>('/kb/files', { query: { kbId }, signal })
}

export function deleteFile(kbId: number, fileId: string): Promise<MessageResponse> {
  return api<MessageResponse>('/kb/files', { method: 'DELETE', query: { kbId, fileId } })
}

export function reprocessFile(kbId: number, fileId: string): Promise<unknown> {
  return api<unknown>('/kb/files/reprocess', { method: 'POST', body: { kbId, fileId } })
}

export function presignUpload(body: {
  fileName: string
  contentType: string
  fileSize: number
}): Promise<PresignResponse> {
  return api<PresignResponse>('/upload/presigned', { method: 'POST', body })
}

export function associateFile(body: {
  kbId: number
  fileId: string
  fileName: string
  fileKey: string
  contentKey: string
  contentType: string
  fileSize: number
}): Promise<FileResponse> {
  return api<FileResponse>('/kb/files', { method: 'POST', body })
}

export function searchKnowledgeBases(
  kbIds: number[],
  query: string,
  topK: number,
): Promise<SearchResponse> {
  const body = kbIds.length === 1 ? { kbId: kbIds[0], query, topK } : { kbIds, query, topK }
  return api<SearchResponse>('/kb/search', { method: 'POST', body })
}

export type DownloadPart = 'original' | 'content' | 'image'

export function downloadPart(
  kbId: number,
  fileId: string,
  part: DownloadPart,
  page?: number,
): Promise<Blob> {
  return apiBlob('/kb/files/download', { kbId, fileId, part, page })
}

/** Saves a blob under a file name: an object URL clicked through a temporary `<a download>`. */
export function saveBlob(blob: Blob, fileName: string): void {
  const url = URL.createObjectURL(blob)
  const link = document.createElement('a')
  link.href = url
  link.download = fileName
  link.rel = 'noopener'
  link.style.display = 'none'
  document.body.appendChild(link)
  link.click()
  link.remove()
  // Give the browser time to start the download before the address goes away.
  window.setTimeout(() => URL.revokeObjectURL(url), 30_000)
}
