// Response shapes of the endpoints the console's chat and layout use.

export interface Agent {
  id: number
  name: string
  description: string | null
  role?: string | null
  model?: string | null
  knowledgeBaseIds?: number[]
}

export interface AgentsResponse {
  success: boolean
  agents: Agent[]
}

export interface SidebarLink {
  label: string
  url: string
  icon?: string
}

export interface OrgSettings {
  serviceAgent: boolean
  defaultAgentId: number | null
  spendCaps: Partial<Record<'daily' | 'weekly' | 'monthly', number>>
  sidebarPinnedAppIds: number[]
  sidebarLinks: SidebarLink[]
  feedbackModal: { customHtml: string }
}

export interface SpendCapPeriodStatus {
  cap: number
  spent: number
  remaining: number
  exceeded: boolean
  resetsAt: string
}

/** What of the settings every member's console shows (`GET /orgSettings/console`). */
export interface ConsoleLayout {
  defaultAgentId: number | null
  sidebarPinnedAppIds: number[]
  sidebarLinks: SidebarLink[]
  feedbackModal: { customHtml: string }
}

export interface OrgSettingsResponse {
  settings: OrgSettings
  spendCapStatus: Partial<Record<'daily' | 'weekly' | 'monthly', SpendCapPeriodStatus>>
}

export type StreamStatus = 'in_progress' | 'awaiting_approval' | 'completed' | 'failed' | 'cancelled'

export interface ConversationSummary {
  threadId: string
  agentId: number | null
  title: string | null
  streamStatus: StreamStatus | null
  upstreamConversationId: string | null
  createdAt: string
  updatedAt: string
}

export interface StoredPart {
  type: string
  [key: string]: unknown
}

export interface StoredMessage {
  id: string
  role: 'user' | 'assistant' | 'system'
  parts: StoredPart[]
  createdAt: string
}

export interface ConversationDetail extends ConversationSummary {
  messages: StoredMessage[]
}

export interface ConversationsPage {
  success: boolean
  conversations: ConversationSummary[]
  nextCursor: string | null
}

export interface RenameResponse {
  success: boolean
  threadId: string
  title: string | null
}
