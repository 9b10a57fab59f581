import { useInfiniteQuery, useQuery } from '@tanstack/react-query'
import { api } from './client'
import type { Agent, AgentsResponse, ConsoleLayout, ConversationsPage } from './types'

export const keys = {
  agents: ['agents'] as const,
  consoleLayout: ['orgSettings', 'console'] as const,
  conversations: ['conversations'] as const,
  conversation: (threadId: string) => ['conversation', threadId] as const,
}

export function useAgents() {
  return useQuery({
    queryKey: keys.agents,
    queryFn: ({ signal }) => api<AgentsResponse>('/agents', { signal }).then((r) => r.agents ?? []),
  })
}

/** The default agent, pinned agents, sidebar links and feedback HTML: any member reads them. */
export function useConsoleLayout() {
  return useQuery({
    queryKey: keys.consoleLayout,
    queryFn: ({ signal }) => api<ConsoleLayout>('/orgSettings/console', { signal }),
    staleTime: 60_000,
  })
}

export const CONVERSATION_PAGE_SIZE = 20

export function useConversations(agentId?: number | null) {
  return useInfiniteQuery({
    queryKey: [...keys.conversations, agentId ?? 'all'],
    initialPageParam: null as string | null,
    queryFn: ({ pageParam, signal }) =>
      api<ConversationsPage>('/conversations', {
        query: { agentId: agentId ?? undefined, limit: CONVERSATION_PAGE_SIZE, cursor: pageParam },
        signal,
      }),
    getNextPageParam: (last) => last.nextCursor ?? null,
  })
}

/** Agents for pickers: `first` (the default agent) leads, then `pinned` in order, then the rest. */
export function orderAgents(agents: Agent[], first: number | null | undefined, pinned: number[] = []): Agent[] {
  const rank = new Map<number, number>()
  if (first != null) rank.set(first, -1)
  pinned.forEach((id, i) => {
    if (!rank.has(id)) rank.set(id, i)
  })
  return agents
    .map((agent, index) => ({ agent, index }))
    .sort((a, b) => {
      const ra = rank.get(a.agent.id) ?? Number.MAX_SAFE_INTEGER
      const rb = rank.get(b.agent.id) ?? Number.MAX_SAFE_INTEGER
      return ra - rb || a.index - b.index
    })
    .map(({ agent }) => agent)
}
