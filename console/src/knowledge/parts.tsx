// Small pieces shared by the knowledge pages: status badge, confirm dialog, the
// create/edit form of a knowledge base.
import { useId, useState, type FormEvent, type ReactNode } from 'react'
import { Dialog } from '../ui/Dialog'
import { ErrorNote } from '../ui/ErrorNote'
import { fileStatusLabel, kbStatusLabel, statusTone } from './format'
import './knowledge.css'

/** A small action button of a table row, described by the row's name (`describedBy`). */
export function RowButton(props: {
  describedBy: string
  onClick: () => void
  children: ReactNode
  danger?: boolean
  disabled?: boolean
  busy?: boolean
}) {
  return (
    <button
      type="button"
      className={props.danger ? 'kb-btn kb-btn-small kb-btn-danger' : 'kb-btn kb-btn-small'}
      aria-describedby={props.describedBy}
      onClick={props.onClick}
      disabled={props.disabled}
      aria-busy={props.busy || undefined}
    >
      {props.children}
    </button>
  )
}

export function StatusBadge(props: { status: string; kind: 'file' | 'kb'; id?: string }) {
  const { status, kind, id } = props
  const label = kind === 'file' ? fileStatusLabel(status) : kbStatusLabel(status)
  const tone = statusTone(status)
  return (
    <span id={id} className={`kb-badge kb-badge-${tone}`} data-status={status}>
      {tone === 'busy' && <span className="kb-spinner" aria-hidden="true" />}
      {label}
    </span>
  )
}

export function ConfirmDialog(props: {
  title: string
  open: boolean
  confirmLabel: string
  busy?: boolean
  error?: unknown
  onConfirm: () => void
  onClose: () => void
  children: ReactNode
}) {
  const { title, open, confirmLabel, busy, error, onConfirm, onClose, children } = props
  return (
    <Dialog title={title} open={open} onClose={onClose}>
      <div className="kb-confirm">
        {children}
        <ErrorNote error={error} />
        <div className="kb-dialog-actions">
          <button type="button" className="kb-btn" onClick={onClose} data-autofocus>
            Cancel
          </button>
          <button
            type="button"
            className="kb-btn kb-btn-danger"
            onClick={onConfirm}
            disabled={busy}
            aria-busy={busy || undefined}
          >
            {confirmLabel}
          </button>
        </div>
      </div>
    </Dialog>
  )
}

/** The form of "New knowledge base" (Create) and of editing one (Save). */
export function KnowledgeBaseFormDialog(props: {
  title: string
  open: boolean
  submitLabel: 'Create' | 'Save'
  initialName?: string
  initialDescription?: string
  busy?: boolean
  error?: unknown
  onSubmit: (values: { name: string; description: string }) => void
  onClose: () => void
}) {
  const { title, open, submitLabel, busy, error, onSubmit, onClose } = props
  return (
    <Dialog title={title} open={open} onClose={onClose}>
      {open && (
        <KnowledgeBaseForm
          submitLabel={submitLabel}
          initialName={props.initialName ?? ''}
          initialDescription={props.initialDescription ?? ''}
          busy={busy}
          error={error}
          onSubmit={onSubmit}
          onCancel={onClose}
        />
      )}
    </Dialog>
  )
}

function KnowledgeBaseForm(props: {
  submitLabel: string
  initialName: string
  initialDescription: string
  busy?: boolean
  error?: unknown
  onSubmit: (values: { name: string; description: string }) => void
  onCancel: () => void
}) {
  const { submitLabel, busy, error, onSubmit, onCancel } = props
  const [name, setName] = useState(props.initialName)
  const [description, setDescription] = useState(props.initialDescription)
  const [touched, setTouched] = useState(false)
  const nameId = useId()
  const descriptionId = useId()
  const nameErrorId = useId()
  const nameMissing = name.trim() === ''

  function submit(event: FormEvent) {
    event.preventDefault()
    setTouched(true)
    if (nameMissing) return
    onSubmit({ name: name.trim(), description: description.trim() })
  }

  return (
    <form className="kb-form" onSubmit={submit} noValidate>
      <div className="kb-field">
        <label htmlFor={nameId}>Name</label>
        <input
          id={nameId}
          type="text"
          value={name}
          onChange={(e) => setName(e.target.value)}
          required
          maxLength={200}
          autoComplete="off"
          data-autofocus
          aria-invalid={touched && nameMissing ? true : undefined}
          aria-describedby={touched && nameMissing ? nameErrorId : undefined}
        />
        {touched && nameMissing && (
          <p id={nameErrorId} className="kb-field-error">
            A name is required.
          </p>
        )}
      </div>
      <div className="kb-field">
        <label htmlFor={descriptionId}>Description</label>
        <textarea
          id={descriptionId}
          value={description}
          onChange={(e) => setDescription(e.target.value)}
          rows={3}
          maxLength={4000}
        />
      </div>
      <ErrorNote error={error} />
      <div className="kb-dialog-actions">
        <button type="button" className="kb-btn" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="kb-btn kb-btn-primary" disabled={busy} aria-busy={busy || undefined}>
          {submitLabel}
        </button>
      </div>
    </form>
  )
}
