// Reads a JWT's claims WITHOUT verifying it: for display only (the API verifies).
export interface TokenClaims {
  sub: string | null
  orgId: string | null
  orgRole: string | null
  email: string | null
  exp: number | null
}

function base64UrlDecode(part: string): string {
  const b64 = part.replace(/-/g, '+').replace(/_/g, '/')
  const padded = b64 + '='.repeat((4 - (b64.length % 4)) % 4)
  const binary = window.atob(padded)
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0))
  return new TextDecoder().decode(bytes)
}

function str(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null
}

export function normaliseRole(role: string | null): string | null {
  if (!role) return null
  return role.startsWith('org:') ? role.slice(4) : role
}

export function decodeClaims(token: string): TokenClaims | null {
  const parts = token.split('.')
  if (parts.length < 2) return null
  try {
    const payload = JSON.parse(base64UrlDecode(parts[1])) as Record<string, unknown>
    const o = payload.o && typeof payload.o === 'object' ? (payload.o as Record<string, unknown>) : null
    const orgId = str(o?.id) ?? str(payload.org_id)
    const orgRole = normaliseRole(str(o?.rol) ?? str(payload.org_role))
    return {
      sub: str(payload.sub),
      orgId,
      orgRole,
      email: str(payload.email),
      exp: typeof payload.exp === 'number' ? payload.exp : null,
    }
  } catch {
    return null
  }
}
