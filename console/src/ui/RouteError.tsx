import { isRouteErrorResponse, Link, useRouteError } from 'react-router'

export function RouteError() {
  const error = useRouteError()
  const message = isRouteErrorResponse(error)
    ? `${error.status} ${error.statusText}`
    : error instanceof Error
      ? error.message
      : 'Something went wrong.'
  return (
    <main id="main" className="page">
      <h1>Something went wrong</h1>
      <div className="error-note" role="alert">
        <p>{message}</p>
      </div>
      <p>
        <Link to="/" reloadDocument>
          Reload the console
        </Link>
      </p>
    </main>
  )
}
