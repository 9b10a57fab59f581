// Shapes of the knowledge-base, file, upload and search endpoints
// (agent-platform-api.md §2.1, §2.2, §4.1–4.5; CONTRACT.md "Knowledge bases", "Uploads").

export type KnowledgeBaseStatus = 'ready' | 'processing' | 'reindexing' | 'error'

export interface KnowledgeBase {
  id: number
  name: string
  description: string
  embeddingModel: string
  embeddingDimensions: number
  extractionModel?: string | null
  extractionSchema?: Record<string, unknown> | null
  source?: string | null
  inboundEmailAddress?: string | null
  trigger?: Record<string, unknown> | null
  createdAt: string
  updatedAt: string
  userId: string
  fileCount: number
  lastFileUploadedAt?: string | null
  totalSize: number
  status: KnowledgeBaseStatus | string
}

export type ProcessingStatus =
  | 'parsing'
  | 'parsed'
  | 'chunking'
  | 'completed'
  | 'parse_failed'
  | 'chunk_failed'
  | 'extract_failed'

export interface KbFile {
  id: number
  knowledgeBaseId: number
  fileId: string
  fileName: string
  fileKey: string
  contentKey: string
  contentType: string
  fileSize?: number | null
  processingStatus: ProcessingStatus | string
  processingError?: string | null
  imageKeys?: string[] | null
  userMetadata?: Record<string, unknown> | null
  extractedData?: Record<string, unknown> | null
  ocrPages?: number | null
  createdAt: string
  updatedAt: string
}

export interface KnowledgeBaseListResponse {
  success: boolean
  knowledgeBases: KnowledgeBase[]
}

export interface KnowledgeBaseResponse {
  success: boolean
  knowledgeBase: KnowledgeBase
}

export interface FileListResponse {
  success: boolean
  files: KbFile[]
  nextCursor?: string | null
}

export interface FileResponse {
  success: boolean
  file: KbFile
}

export interface MessageResponse {
  success: boolean
  message?: string
}

export interface PresignResponse {
  success: boolean
  uploadUrl: string
  method: string
  headers: Record<string, string>
  fileId: string
  fileKey: string
  contentKey: string
  expiresAt: string
}

export interface SearchResult {
  fileId: string
  fileName: string
  chunkId: number
  text: string
  score: number
  knowledgeBaseId?: number
  pageNumber?: number | null
  highlights?: [number, number][] | { start: number; end: number }[] | null
}

export interface SearchResponse {
  success: boolean
  results: SearchResult[]
}
