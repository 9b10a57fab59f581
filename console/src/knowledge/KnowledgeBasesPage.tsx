// The organization's knowledge bases (/knowledge): list with status, create, edit, delete,
// and a search over the selected ones.
import { useId, useState } from 'react'
import { Link } from 'react-router'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { ErrorNote } from '../ui/ErrorNote'
import {
  createKnowledgeBase,
  deleteKnowledgeBase,
  kbKeys,
  listKnowledgeBases,
  updateKnowledgeBase,
} from './api'
import { formatBytes, formatDate } from './format'
import { ConfirmDialog, KnowledgeBaseFormDialog, RowButton, StatusBadge } from './parts'
import { SearchPanel } from './SearchPanel'
import type { KnowledgeBase, KnowledgeBaseListResponse } from './types'
import './knowledge.css'

/** POST /kb/search takes at most this many knowledge bases at once. */
const MAX_SEARCHED = 20

export function KnowledgeBasesPage() {
  const queryClient = useQueryClient()
  const kbs = useQuery({
    queryKey: kbKeys.all,
    queryFn: ({ signal }) => listKnowledgeBases(signal),
    refetchInterval: (query) =>
      query.state.data?.knowledgeBases.some((kb) => kb.status === 'processing' || kb.status === 'reindexing')
        ? 5_000
        : false,
    refetchIntervalInBackground: false,
  })
  const [creating, setCreating] = useState(false)
  const [editing, setEditing] = useState<KnowledgeBase | null>(null)
  const [deleting, setDeleting] = useState<KnowledgeBase | null>(null)
  const [selected, setSelected] = useState<ReadonlySet<number>>(new Set())
  const [notice, setNotice] = useState('')
  const baseId = useId()

  const create = useMutation({
    mutationFn: createKnowledgeBase,
    onSuccess: (data) => {
      setCreating(false)
      setNotice(`Created ${data.knowledgeBase.name}.`)
      queryClient.setQueryData<KnowledgeBaseListResponse>(kbKeys.all, (old) =>
        old ? { ...old, knowledgeBases: [...old.knowledgeBases, data.knowledgeBase] } : old,
      )
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
    },
  })
  const update = useMutation({
    mutationFn: updateKnowledgeBase,
    onSuccess: (data) => {
      setEditing(null)
      setNotice(`Saved ${data.knowledgeBase.name}.`)
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
    },
  })
  const remove = useMutation({
    mutationFn: (kb: KnowledgeBase) => deleteKnowledgeBase(kb.id),
    onSuccess: (data, kb) => {
      setDeleting(null)
      setNotice(data?.message ?? `Deleted ${kb.name}.`)
      setSelected((s) => {
        const next = new Set(s)
        next.delete(kb.id)
        return next
      })
      queryClient.setQueryData<KnowledgeBaseListResponse>(kbKeys.all, (old) =>
        old ? { ...old, knowledgeBases: old.knowledgeBases.filter((k) => k.id !== kb.id) } : old,
      )
      queryClient.removeQueries({ queryKey: kbKeys.files(kb.id) })
      void queryClient.invalidateQueries({ queryKey: kbKeys.all })
    },
  })

  const list = kbs.data?.knowledgeBases ?? []
  const names = new Map(list.map((kb) => [kb.id, kb.name]))
  const chosen = list.filter((kb) => selected.has(kb.id)).map((kb) => kb.id)
  const searchIds = (chosen.length > 0 ? chosen : list.map((kb) => kb.id)).slice(0, MAX_SEARCHED)
  const scopeText =
    chosen.length > 0
      ? `Over the ${chosen.length} selected knowledge base${chosen.length === 1 ? '' : 's'}${chosen.length > MAX_SEARCHED ? ` (the first ${MAX_SEARCHED})` : ''}.`
      : list.length > MAX_SEARCHED
        ? `Over the first ${MAX_SEARCHED} knowledge bases; tick the ones you want in the table.`
        : 'Over every knowledge base; tick some in the table to narrow it.'

  function toggle(id: number, on: boolean) {
    setSelected((s) => {
      const next = new Set(s)
      if (on) next.add(id)
      else next.delete(id)
      return next
    })
  }

  return (
    <div className="kb-page">
      <header className="kb-header">
        <div className="kb-header-text">
          <h1>Knowledge bases</h1>
          <p className="kb-description">
            Files your agents search. Upload documents to a knowledge base, then give it to an
            agent.
          </p>
        </div>
        <div className="kb-header-actions">
          <button
            type="button"
            className="kb-btn kb-btn-primary"
            onClick={() => {
              create.reset()
              setCreating(true)
            }}
          >
            New knowledge base
          </button>
        </div>
      </header>

      <p className="kb-notice" role="status" aria-live="polite">
        {notice}
      </p>

      <KnowledgeBaseFormDialog
        title="New knowledge base"
        open={creating}
        submitLabel="Create"
        busy={create.isPending}
        error={create.error}
        onSubmit={(values) => create.mutate(values)}
        onClose={() => setCreating(false)}
      />
      <KnowledgeBaseFormDialog
        title={editing ? `Edit ${editing.name}` : 'Edit knowledge base'}
        open={editing !== null}
        submitLabel="Save"
        initialName={editing?.name}
        initialDescription={editing?.description}
        busy={update.isPending}
        error={update.error}
        onSubmit={(values) => {
          if (editing) update.mutate({ kbId: editing.id, ...values })
        }}
        onClose={() => setEditing(null)}
      />
      <ConfirmDialog
        title="Delete knowledge base"
        open={deleting !== null}
        confirmLabel="Delete"
        busy={remove.isPending}
        error={remove.error}
        onConfirm={() => {
          if (deleting) remove.mutate(deleting)
        }}
        onClose={() => setDeleting(null)}
      >
        <p>
          Delete <strong>{deleting?.name}</strong> and its {deleting?.fileCount ?? 0} file
          {deleting?.fileCount === 1 ? '' : 's'}? Their passages and stored copies are removed,
          and agents using it will no longer find them. This cannot be undone.
        </p>
      </ConfirmDialog>

      <section className="kb-section" aria-labelledby={`${baseId}-list`}>
        <h2 id={`${baseId}-list`} className="visually-hidden">
          All knowledge bases
        </h2>
        {kbs.isPending && <p className="kb-muted">Loading knowledge bases…</p>}
        {kbs.isError && <ErrorNote error={kbs.error} />}
        {kbs.isSuccess && list.length === 0 && (
          <div className="kb-empty">
            <p>No knowledge bases yet.</p>
            <p>Create one with “New knowledge base”, then upload files to it.</p>
          </div>
        )}
        {list.length > 0 && (
          <div className="kb-table-wrap" role="region" aria-label="Knowledge bases table" tabIndex={0}>
            <table className="kb-table kb-list-table">
              <thead>
                <tr>
                  <th scope="col">
                    <span className="visually-hidden">Selected</span>
                  </th>
                  <th scope="col">Name</th>
                  <th scope="col">Status</th>
                  <th scope="col">Files</th>
                  <th scope="col">Size</th>
                  <th scope="col">Last upload</th>
                  <th scope="col">
                    <span className="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {list.map((kb) => {
                  const nameId = `${baseId}-kb-${kb.id}`
                  return (
                    <tr key={kb.id} data-kb-name={kb.name} data-kb-id={kb.id}>
                      <td className="kb-cell-select">
                        <input
                          type="checkbox"
                          checked={selected.has(kb.id)}
                          onChange={(e) => toggle(kb.id, e.target.checked)}
                          aria-label={`Select ${kb.name}`}
                        />
                      </td>
                      <td data-label="Name" className="kb-cell-name">
                        <Link id={nameId} to={`/knowledge/${kb.id}`} className="kb-kb-link">
                          {kb.name}
                        </Link>
                        {kb.description && <p className="kb-muted kb-kb-description">{kb.description}</p>}
                      </td>
                      <td data-label="Status">
                        <StatusBadge status={kb.status} kind="kb" />
                      </td>
                      <td data-label="Files">{kb.fileCount}</td>
                      <td data-label="Size">{formatBytes(kb.totalSize)}</td>
                      <td data-label="Last upload" className="kb-cell-date">{formatDate(kb.lastFileUploadedAt)}</td>
                      <td className="kb-cell-actions">
                        <div className="kb-row-actions">
                          <RowButton
                            describedBy={nameId}
                            onClick={() => {
                              update.reset()
                              setEditing(kb)
                            }}
                          >
                            Edit
                          </RowButton>
                          <RowButton
                            describedBy={nameId}
                            danger
                            onClick={() => {
                              remove.reset()
                              setDeleting(kb)
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
          </div>
        )}
      </section>

      {list.length > 0 && (
        <section className="kb-section">
          <h2>Search knowledge bases</h2>
          <SearchPanel kbIds={searchIds} kbNames={names} scopeText={scopeText} />
        </section>
      )}
    </div>
  )
}
