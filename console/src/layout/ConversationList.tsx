import { useId, useState } from 'react'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { NavLink, useMatch, useNavigate } from 'react-router'
import { api } from '../api/client'
import { keys, useConversations } from '../api/hooks'
import type { ConversationSummary, RenameResponse } from '../api/types'
import { forgetThread } from '../chat/registry'
import { Dialog } from '../ui/Dialog'
import { ErrorNote } from '../ui/ErrorNote'

function label(conversation: ConversationSummary): string {
  return conversation.title || 'Untitled conversation'
}

function RenameDialog({ conversation, onClose }: { conversation: ConversationSummary; onClose: () => void }) {
  const queryClient = useQueryClient()
  const [name, setName] = useState(conversation.title ?? '')
  const inputId = useId()
  const rename = useMutation({
    mutationFn: (value: string) =>
      api<RenameResponse>('/api/renameConversation', {
        method: 'PATCH',
        body: { threadId: conversation.threadId, name: value },
      }),
    onSuccess: () => {
      void queryClient.invalidateQueries({ queryKey: keys.conversations })
      void queryClient.invalidateQueries({ queryKey: keys.conversation(conversation.threadId) })
      onClose()
    },
  })
  return (
    <Dialog title="Rename conversation" open onClose={onClose}>
      <form
        className="form"
        onSubmit={(event) => {
          event.preventDefault()
          rename.mutate(name)
        }}
      >
        <label htmlFor={inputId}>Title</label>
        <input id={inputId} data-autofocus value={name} onChange={(event) => setName(event.target.value)} />
        <p className="hint">Leave it empty to clear the title.</p>
        <ErrorNote error={rename.error} />
        <div className="form-buttons">
          <button type="button" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="button-primary" disabled={rename.isPending}>
            Save
          </button>
        </div>
      </form>
    </Dialog>
  )
}

function DeleteDialog({ conversation, onClose }: { conversation: ConversationSummary; onClose: () => void }) {
  const queryClient = useQueryClient()
  const navigate = useNavigate()
  const viewing = useMatch('/chat/:threadId')?.params.threadId === conversation.threadId
  const remove = useMutation({
    mutationFn: () =>
      api<{ success: boolean; message: string }>('/conversations', {
        method: 'DELETE',
        query: { threadId: conversation.threadId },
      }),
    onSuccess: () => {
      forgetThread(conversation.threadId)
      queryClient.removeQueries({ queryKey: keys.conversation(conversation.threadId) })
      void queryClient.invalidateQueries({ queryKey: keys.conversations })
      onClose()
      if (viewing) void navigate('/')
    },
  })
  return (
    <Dialog title="Delete conversation" open onClose={onClose}>
      <p>
        Delete “{label(conversation)}”? Its messages are removed for good; a running answer is stopped.
      </p>
      <ErrorNote error={remove.error} />
      <div className="form-buttons">
        <button type="button" onClick={onClose} data-autofocus>
          Cancel
        </button>
        <button type="button" className="button-danger" disabled={remove.isPending} onClick={() => remove.mutate()}>
          Delete
        </button>
      </div>
    </Dialog>
  )
}

export function ConversationList({ onNavigate }: { onNavigate?: () => void }) {
  const conversations = useConversations()
  const [renaming, setRenaming] = useState<ConversationSummary | null>(null)
  const [deleting, setDeleting] = useState<ConversationSummary | null>(null)
  const items = conversations.data?.pages.flatMap((page) => page.conversations) ?? []

  return (
    <section className="sidebar-section">
      <h2 className="sidebar-heading">
        Conversations
      </h2>
      {conversations.isLoading && <p className="muted">Loading…</p>}
      <ErrorNote error={conversations.error} />
      {!conversations.isLoading && !conversations.error && items.length === 0 && (
        <p className="muted">No conversations yet.</p>
      )}
      <ul className="conversation-list">
        {items.map((conversation) => (
          <li key={conversation.threadId} className="conversation-item">
            <NavLink to={`/chat/${conversation.threadId}`} className="conversation-link" onClick={onNavigate}>
              {label(conversation)}
            </NavLink>
            <span className="conversation-actions">
              <button type="button" className="button-icon" title="Rename" onClick={() => setRenaming(conversation)}>
                <span aria-hidden="true">✎</span>
                <span className="visually-hidden">Rename {label(conversation)}</span>
              </button>
              <button type="button" className="button-icon" title="Delete" onClick={() => setDeleting(conversation)}>
                <span aria-hidden="true">✕</span>
                <span className="visually-hidden">Delete {label(conversation)}</span>
              </button>
            </span>
          </li>
        ))}
      </ul>
      {conversations.hasNextPage && (
        <button
          type="button"
          className="button-small"
          disabled={conversations.isFetchingNextPage}
          onClick={() => void conversations.fetchNextPage()}
        >
          {conversations.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      )}
      {renaming && <RenameDialog conversation={renaming} onClose={() => setRenaming(null)} />}
      {deleting && <DeleteDialog conversation={deleting} onClose={() => setDeleting(null)} />}
    </section>
  )
}
