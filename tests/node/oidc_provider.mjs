// A real OpenID provider on loopback for the console's sign-in tests (tests only).
//
// panva's oidc-provider with one public client (the console: authorization code + PKCE,
// refresh tokens), access tokens as signed JWTs for the API (RFC 9068, audience
// `agent-platform-api`) carrying the claims the service reads (Clerk v1 organization claims
// `org_id` and `org_role`; `azp`, the client id, as Keycloak sets it), and minimal login,
// consent and logout pages of its own (no external fonts or scripts: the tests run offline).
//
//   node tests/node/oidc_provider.mjs --port 4100 --console-origin http://127.0.0.1:8000
//
// Options (or the environment variables in brackets):
//   --port N                 (OIDC_PORT) the port on 127.0.0.1; 0 picks a free one
//   --console-origin URL     (OIDC_CONSOLE_ORIGIN) the console's origin: redirect URI
//                            `<origin>/console/auth/callback`, post-logout `<origin>/console/`
//   --client-id ID           (OIDC_CLIENT_ID) default `agent-platform-console`
//   --audience AUD           (OIDC_AUDIENCE) default `agent-platform-api`
//   --access-token-ttl S     (OIDC_ACCESS_TOKEN_TTL) seconds, default 20
//   --exit-with-stdin        exit when standard input closes (the test's pipe: no orphan)
//
// Accounts, by login name: `ada` (user_ada, admin of org_oidc) and `grace` (user_grace,
// member of org_oidc). No password: a fixture, not an identity store.
//
// Prints `READY <issuer>` on standard output once listening; logs grants and errors on
// standard error.

import crypto from 'node:crypto';
import http from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

const { values: options } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.OIDC_PORT ?? '0' },
    'console-origin': { type: 'string', default: process.env.OIDC_CONSOLE_ORIGIN },
    'client-id': { type: 'string', default: process.env.OIDC_CLIENT_ID ?? 'agent-platform-console' },
    audience: { type: 'string', default: process.env.OIDC_AUDIENCE ?? 'agent-platform-api' },
    'access-token-ttl': { type: 'string', default: process.env.OIDC_ACCESS_TOKEN_TTL ?? '20' },
    'exit-with-stdin': { type: 'boolean', default: false },
  },
});

const HOST = '127.0.0.1';
const consoleOrigin = options['console-origin'] && new URL(options['console-origin']).origin;
if (!consoleOrigin) {
  console.error('oidc_provider: --console-origin (or OIDC_CONSOLE_ORIGIN) is required');
  process.exit(2);
}
if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(consoleOrigin).hostname)) {
  console.error('oidc_provider: the console must be on a loopback address');
  process.exit(2);
}
const clientId = options['client-id'];
const audience = options.audience;
// The resource indicator (RFC 8707: an absolute URI) of the API, whose tokens carry `audience`.
const RESOURCE = 'urn:agent-platform:api';
const accessTokenTtl = Number.parseInt(options['access-token-ttl'], 10);
if (!(accessTokenTtl > 0)) {
  console.error('oidc_provider: --access-token-ttl must be a positive number of seconds');
  process.exit(2);
}

const ACCOUNTS = {
  ada: {
    accountId: 'user_ada',
    email: 'ada@example.test',
    given_name: 'Ada',
    family_name: 'Lovelace',
    org_id: 'org_oidc',
    org_role: 'org:admin',
  },
  grace: {
    accountId: 'user_grace',
    email: 'grace@example.test',
    given_name: 'Grace',
    family_name: 'Hopper',
    org_id: 'org_oidc',
    org_role: 'org:member',
  },
};
const BY_ID = new Map(Object.values(ACCOUNTS).map((account) => [account.accountId, account]));

// Fresh keys every run: the tokens are worth nothing once the process ends.
const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), alg: 'RS256', use: 'sig' };

function page(title, body) {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)} - test identity provider</title>
<style>body{font-family:sans-serif;max-width:24rem;margin:2rem auto;padding:0 1rem}
label,input,button{display:block;font-size:1rem;margin:.5rem 0}
button{padding:.4rem 1rem}.error{color:#a00}</style>
</head>
<body>
<main>
<h1>${escape(title)}</h1>
${body}
</main>
</body>
</html>`;
}

function escape(text) {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const configuration = {
  clients: [
    {
      client_id: clientId,
      client_name: 'Agent Platform console',
      application_type: 'web',
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: [`${consoleOrigin}/console/auth/callback`],
      post_logout_redirect_uris: [`${consoleOrigin}/console/`, `${consoleOrigin}/console`],
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name'],
  },
  scopes: ['openid', 'offline_access', 'profile', 'email'],
  async findAccount(_ctx, id) {
    const account = BY_ID.get(id);
    if (!account) return undefined;
    return {
      accountId: id,
      async claims() {
        return {
          sub: id,
          email: account.email,
          email_verified: true,
          name: `${account.given_name} ${account.family_name}`,
          given_name: account.given_name,
          family_name: account.family_name,
        };
      },
    };
  },
  // The API's claims in its access token: organization (Clerk v1) and profile.
  async extraTokenClaims(_ctx, token) {
    const account = BY_ID.get(token.accountId);
    if (!account || token.kind !== 'AccessToken') return undefined;
    return {
      azp: token.clientId, // as Keycloak does: the service checks it (AP_AUTH_AUTHORIZED_PARTIES)
      org_id: account.org_id,
      org_role: account.org_role,
      email: account.email,
      first_name: account.given_name,
      last_name: account.family_name,
    };
  },
  // A refresh token for the console whether or not it asked for `offline_access` with
  // `prompt=consent` (without it the provider drops that scope): it renews the short-lived
  // access token. Without `offline_access` it ends with the provider's session.
  async issueRefreshToken(_ctx, client) {
    return client.grantTypeAllowed('refresh_token');
  },
  clientBasedCORS(_ctx, origin) {
    return origin === consoleOrigin;
  },
  features: {
    devInteractions: { enabled: false },
    rpInitiatedLogout: {
      enabled: true,
      async logoutSource(ctx, form) {
        ctx.type = 'html';
        ctx.body = page(
          'Sign out',
          `<p>Sign out of the test identity provider?</p>
${form}
<button autofocus type="submit" form="op.logoutForm" value="yes" name="logout">Yes, sign me out</button>
<button type="submit" form="op.logoutForm">No, stay signed in</button>`,
        );
      },
      async postLogoutSuccessSource(ctx) {
        ctx.type = 'html';
        ctx.body = page('Signed out', '<p>You are signed out of the test identity provider.</p>');
      },
    },
    resourceIndicators: {
      enabled: true,
      async defaultResource(_ctx, _client, oneOf) {
        return oneOf ?? RESOURCE;
      },
      async useGrantedResource() {
        return true;
      },
      async getResourceServerInfo(_ctx, resourceIndicator) {
        if (resourceIndicator !== RESOURCE) throw new errors.InvalidTarget();
        return {
          scope: 'openid profile email api',
          audience,
          accessTokenTTL: accessTokenTtl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
  ttl: {
    AccessToken: accessTokenTtl,
    AuthorizationCode: 60,
    IdToken: 3600,
    Interaction: 600,
    Grant: 3600,
    Session: 3600,
    RefreshToken: 3600,
  },
  interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
  async renderError(ctx, out) {
    ctx.type = 'html';
    ctx.body = page(
      'Sign-in error',
      `<p class="error" role="alert">${escape(out.error)}: ${escape(out.error_description ?? '')}</p>`,
    );
  },
};

const server = http.createServer();
server.listen(Number.parseInt(options.port, 10), HOST, () => {
  const { port } = server.address();
  const issuer = `http://${HOST}:${port}`;
  const provider = new Provider(issuer, configuration);
  for (const event of ['grant.success', 'end_session.success']) {
    provider.on(event, (ctx) => console.error(`${event} ${ctx.oidc.params?.grant_type ?? ''}`));
  }
  for (const event of ['grant.error', 'server_error', 'authorization.error', 'end_session.error']) {
    provider.on(event, (_ctx, error) =>
      console.error(`${event} ${error.name}: ${error.message} ${error.error_detail ?? ''}`),
    );
  }
  const providerCallback = provider.callback();
  server.on('request', (req, res) => {
    const url = new URL(req.url, issuer);
    const match = url.pathname.match(/^\/interaction\/([\w-]+)(?:\/(login|confirm|abort))?$/);
    if (!match) {
      providerCallback(req, res);
      return;
    }
    interaction(provider, req, res, match[2]).catch((error) => {
      console.error(`interaction ${error.name}: ${error.message}`);
      send(res, 400, page('Sign-in error', `<p class="error" role="alert">${escape(error.message)}</p>`));
    });
  });
  console.log(`READY ${issuer}`);
});

function send(res, status, html) {
  res.writeHead(status, {
    'content-type': 'text/html; charset=utf-8',
    'cache-control': 'no-store',
    // A form's redirects count for form-action: the sign-in ends at the console's callback.
    'content-security-policy': `default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; form-action 'self' ${consoleOrigin}`,
  });
  res.end(html);
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 16 * 1024) throw new Error('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function loginPage(uid, clientName, error) {
  return page(
    'Sign in',
    `<p>to continue to ${escape(clientName)}</p>
${error ? `<p class="error" role="alert">${escape(error)}</p>` : ''}
<form method="post" action="/interaction/${escape(uid)}/login" autocomplete="off">
<label for="login">Username</label>
<input id="login" name="login" required autofocus autocapitalize="none">
<button type="submit">Sign in</button>
</form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button type="submit">Cancel</button></form>`,
  );
}

function consentPage(uid, clientName, details) {
  const scopes = (details.missingOIDCScope ?? []).filter((s) => s !== 'openid');
  return page(
    'Authorize',
    `<p>${escape(clientName)} asks to use your account${
      scopes.length ? ` (${scopes.map(escape).join(', ')})` : ''
    }.</p>
<form method="post" action="/interaction/${escape(uid)}/confirm"><button type="submit" autofocus>Allow</button></form>
<form method="post" action="/interaction/${escape(uid)}/abort"><button type="submit">Deny</button></form>`,
  );
}

async function interaction(provider, req, res, action) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params, session, grantId } = details;
  const client = await provider.Client.find(params.client_id);
  const clientName = client?.clientName ?? params.client_id;
  if (req.method === 'GET' && !action) {
    if (prompt.name === 'login') return send(res, 200, loginPage(uid, clientName));
    if (prompt.name === 'consent') return send(res, 200, consentPage(uid, clientName, prompt.details));
    throw new Error(`unknown prompt ${prompt.name}`);
  }
  if (req.method !== 'POST') throw new Error('method not allowed');
  const form = await readForm(req);
  if (action === 'abort') {
    await provider.interactionFinished(
      req,
      res,
      { error: 'access_denied', error_description: 'The user cancelled the sign-in' },
      { mergeWithLastSubmission: false },
    );
    return undefined;
  }
  if (action === 'login') {
    if (prompt.name !== 'login') throw new Error('not a login prompt');
    const account = Object.hasOwn(ACCOUNTS, form.get('login') ?? '')
      ? ACCOUNTS[form.get('login')]
      : undefined;
    if (!account) return send(res, 200, loginPage(uid, clientName, 'Unknown user'));
    await provider.interactionFinished(
      req,
      res,
      { login: { accountId: account.accountId } },
      { mergeWithLastSubmission: false },
    );
    return undefined;
  }
  // confirm: grant what the prompt lists as missing.
  if (prompt.name !== 'consent') throw new Error('not a consent prompt');
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  await provider.interactionFinished(
    req,
    res,
    { consent: { grantId: await grant.save() } },
    { mergeWithLastSubmission: true },
  );
  return undefined;
}

function stop() {
  server.close();
  process.exit(0);
}
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
if (options['exit-with-stdin']) {
  process.stdin.on('end', stop);
  process.stdin.on('close', stop);
  process.stdin.resume();
}
