import { useEffect, useState } from 'react'
import { copyText } from './clipboard'

/** A button whose name stays the same; a short "Copied" note appears beside it. */
export function CopyButton({ label, getText, className }: { label: string; getText: () => string; className?: string }) {
  const [copied, setCopied] = useState(false)
  useEffect(() => {
    if (!copied) return
    const timer = window.setTimeout(() => setCopied(false), 1500)
    return () => window.clearTimeout(timer)
  }, [copied])
  return (
    <span className="copy">
      <button
        type="button"
        className={className ?? 'button-small'}
        onClick={() => {
          void copyText(getText()).then((ok) => setCopied(ok))
        }}
      >
        {label}
      </button>
      {copied && <span className="copy-note">Copied</span>}
    </span>
  )
}
