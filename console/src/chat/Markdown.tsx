// An answer's Markdown. Raw HTML is shown as text (react-markdown's default; never rehype-raw),
// images are not loaded, links open in a new tab without the opener.
import { useRef, type ComponentProps } from 'react'
import ReactMarkdown, { defaultUrlTransform, type Components } from 'react-markdown'
import remarkGfm from 'remark-gfm'
import { CopyButton } from '../ui/CopyButton'

function CodeBlock(props: ComponentProps<'pre'>) {
  const ref = useRef<HTMLPreElement>(null)
  const { children, className } = props
  return (
    <div className="code-block">
      <div className="code-toolbar">
        <CopyButton label="Copy code" getText={() => ref.current?.textContent ?? ''} />
      </div>
      <pre ref={ref} className={className}>
        {children}
      </pre>
    </div>
  )
}

function isWebUrl(url: string | undefined): url is string {
  return !!url && /^https?:\/\//i.test(url)
}

const components: Components = {
  a: ({ href, children }) =>
    href ? (
      <a href={href} target="_blank" rel="noopener noreferrer">
        {children}
      </a>
    ) : (
      <span>{children}</span>
    ),
  img: ({ src, alt }) => {
    const url = typeof src === 'string' ? src : undefined
    const text = alt ? `Image: ${alt}` : 'Image'
    return isWebUrl(url) ? (
      <a href={url} target="_blank" rel="noopener noreferrer" className="md-image-link">
        {text}
      </a>
    ) : (
      <span className="md-image-link">{text}</span>
    )
  },
  pre: ({ children, className }) => <CodeBlock className={className}>{children}</CodeBlock>,
  table: ({ children }) => (
    <div className="table-scroll">
      <table>{children}</table>
    </div>
  ),
}

const plugins = [remarkGfm]

export default function Markdown({ text }: { text: string }) {
  return (
    <div className="markdown">
      <ReactMarkdown remarkPlugins={plugins} components={components} urlTransform={defaultUrlTransform} skipHtml={false}>
        {text}
      </ReactMarkdown>
    </div>
  )
}
