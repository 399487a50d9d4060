// A real OpenID Provider for evalsi's tests: the certified `oidc-provider` package on loopback.
//
//   node provider.mjs [--port 0] [--config '{"audience": "evalsi", ...}']
//
// prints `OIDC_ISSUER http://127.0.0.1:PORT` once it listens. It serves one public client
// (`evalsi-cli`: device flow, authorization code + PKCE S256 with a loopback redirect on any
// port, refresh tokens), access tokens as RS256 JWTs for a resource (`aud`: the configured
// audience) carrying email, email_verified and groups, and a tiny interaction UI that a test
// drives with plain HTTP (tests/support/oidc_provider.py).
//
// --config (or EVALSI_OIDC_CONFIG) is JSON: audience (default "evalsi"), resources (more
// resource indicators: {indicator: aud}), clientId, users ({name: {email, email_verified,
// groups}}; default alice and bob), deviceInterval (s, default 5), slowDownFirst,
// deviceCodeTTL (s), accessTokenTTL (s).
//
// Test-only endpoints (loopback, no auth):
//   POST /test/rotate    a new RS256 key signs from now on; the old ones stay published
//   POST /test/withdraw  every key but the current one leaves the JWKS
//   POST /test/mint      body: claims (JSON); a JWT signed by the current key, like a
//                        GitHub Actions job token (iss, iat, nbf, exp, jti added unless given;
//                        a claim set to null is left out)
//   POST /test/config    merges settings (deviceInterval, slowDownFirst, deviceCodeTTL, ...)
//   GET  /test/polls     the device-code polls seen, in order: [{code, outcome}] (code: a
//                        hash of the device code)
//
// oidc-provider fixes its key set when an instance is built, so a key change builds a new
// Provider with the new set and swaps it in behind the same listening socket. Nothing is lost:
// every instance stores through one adapter (below, oidc-provider's documented adapter
// interface) and signs cookies with the same keys, so sessions, grants and refresh tokens
// carry over.
import { createHash, generateKeyPairSync, randomUUID, sign } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

async function importOidcProvider() {
  try {
    return await import('oidc-provider');
  } catch {
    // ESM ignores NODE_PATH: look for the package in each of its directories
    for (const dir of (process.env.NODE_PATH || '').split(path.delimiter).filter(Boolean)) {
      const pkg = path.join(dir, 'oidc-provider', 'package.json');
      if (existsSync(pkg)) {
        const main = JSON.parse(readFileSync(pkg, 'utf8')).main || 'index.js';
        return import(pathToFileURL(path.join(dir, 'oidc-provider', main)).href);
      }
    }
    throw new Error('oidc-provider is not installed (see tests/support/oidc/package.json)');
  }
}

function argValue(name, fallback) {
  const at = process.argv.indexOf(name);
  return at >= 0 ? process.argv[at + 1] : fallback;
}

const settings = {
  audience: 'evalsi',
  resources: {},
  clientId: 'evalsi-cli',
  users: {
    alice: { email: 'alice@example.com', email_verified: true, groups: ['eval-admins', 'staff'] },
    bob: { email: 'bob@example.com', email_verified: false, groups: [] },
  },
  deviceInterval: 5,
  slowDownFirst: false,
  deviceCodeTTL: 600,
  accessTokenTTL: 3600,
  ...JSON.parse(argValue('--config', process.env.EVALSI_OIDC_CONFIG || '{}')),
};
const DEFAULT_RESOURCE = 'urn:evalsi:api';
const resources = { [DEFAULT_RESOURCE]: settings.audience, ...settings.resources };

function newKey() {
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = privateKey.export({ format: 'jwk' });
  const thumbprint = JSON.stringify({ e: jwk.e, kty: jwk.kty, n: jwk.n });
  const kid = createHash('sha256').update(thumbprint).digest('base64url');
  return { ...jwk, kid, alg: 'RS256', use: 'sig' };
}

let keys = [newKey()]; // keys[0] signs

// One store for every Provider instance (oidc-provider's own memory adapter is per instance).
const store = new Map(); // `${model}:${id}` -> {payload, expiresAt}
const byUserCode = new Map();
const byUid = new Map();
const byGrant = new Map(); // grantId -> Set of keys

class SharedMemoryAdapter {
  constructor(model) { this.model = model; }

  key(id) { return `${this.model}:${id}`; }

  async upsert(id, payload, expiresIn) {
    const key = this.key(id);
    store.set(key, { payload, expiresAt: expiresIn ? Date.now() + expiresIn * 1000 : Infinity });
    if (payload.grantId) {
      if (!byGrant.has(payload.grantId)) byGrant.set(payload.grantId, new Set());
      byGrant.get(payload.grantId).add(key);
    }
    if (payload.userCode) byUserCode.set(payload.userCode, id);
    if (this.model === 'Session' && payload.uid) byUid.set(payload.uid, id);
  }

  async find(id) {
    const entry = store.get(this.key(id));
    // kept a minute past expiry, so oidc-provider itself answers e.g. expired_token (RFC 8628)
    return entry && entry.expiresAt + 60_000 > Date.now() ? entry.payload : undefined;
  }

  async findByUserCode(userCode) {
    return byUserCode.has(userCode) ? this.find(byUserCode.get(userCode)) : undefined;
  }

  async findByUid(uid) {
    return byUid.has(uid) ? this.find(byUid.get(uid)) : undefined;
  }

  async consume(id) {
    const entry = store.get(this.key(id));
    if (entry) entry.payload.consumed = Math.floor(Date.now() / 1000);
  }

  async destroy(id) {
    store.delete(this.key(id));
  }

  async revokeByGrantId(grantId) {
    for (const key of byGrant.get(grantId) || []) store.delete(key);
    byGrant.delete(grantId);
  }
}

const { default: Provider, errors } = await importOidcProvider();

function buildProvider(issuer) {
  const provider = new Provider(issuer, {
    clients: [{
      client_id: settings.clientId,
      client_name: 'evalsi CLI',
      application_type: 'native',
      token_endpoint_auth_method: 'none',
      grant_types: [DEVICE_GRANT, 'authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['http://127.0.0.1/callback'],
    }],
    adapter: SharedMemoryAdapter,
    jwks: { keys },
    cookies: { keys: ['evalsi-test-cookie-key'] },
    claims: {
      openid: ['sub'],
      email: ['email', 'email_verified'],
      profile: ['name'],
      groups: ['groups'],
    },
    scopes: ['openid', 'offline_access', 'email', 'profile', 'groups'],
    conformIdTokenClaims: false,
    async findAccount(ctx, sub) {
      if (!Object.hasOwn(settings.users, sub)) return undefined;
      const user = settings.users[sub];
      return { accountId: sub, async claims() { return { sub, name: sub, ...user }; } };
    },
    async extraTokenClaims(ctx, token) {
      if (!Object.hasOwn(settings.users, token.accountId)) return undefined;
      const user = settings.users[token.accountId];
      return { email: user.email, email_verified: user.email_verified, groups: user.groups };
    },
    async issueRefreshToken(ctx, client) {
      return client.grantTypeAllowed('refresh_token');
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    ttl: {
      AccessToken: () => settings.accessTokenTTL,
      DeviceCode: () => settings.deviceCodeTTL,
    },
    features: {
      devInteractions: { enabled: false },
      deviceFlow: {
        enabled: true,
        async userCodeInputSource(ctx, form, out, err) {
          const text = err ? `error: ${err.name}` : 'enter the code';
          ctx.body = page('device', `<p>${text}</p>${form}`);
        },
        async userCodeConfirmSource(ctx, form, client, deviceInfo, userCode) {
          ctx.body = page('device-confirm', `<p>code ${userCode}</p>${form}`);
        },
        async successSource(ctx) {
          ctx.body = page('device-success', '<p>signed in</p>');
        },
      },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => DEFAULT_RESOURCE,
        useGrantedResource: () => true,
        async getResourceServerInfo(ctx, indicator) {
          if (!(indicator in resources)) throw new errors.InvalidTarget();
          return {
            scope: 'api',
            audience: resources[indicator],
            accessTokenFormat: 'jwt',
            accessTokenTTL: settings.accessTokenTTL,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
  });
  provider.on('device_authorization.success', (ctx, body) => {
    body.interval = settings.deviceInterval; // oidc-provider leaves it out (clients then use 5)
  });
  return provider;
}

function page(prompt, inner) {
  return `<!DOCTYPE html><html><head><title>${prompt}</title></head>`
    + `<body data-prompt="${prompt}">${inner}</body></html>`;
}

async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8');
}

function send(res, status, body, type = 'application/json') {
  const text = type === 'application/json' ? JSON.stringify(body) : body;
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
  res.end(text);
}

let provider;
let handle;
let issuer;

function rebuild() {
  provider = buildProvider(issuer);
  handle = provider.callback();
}

async function interaction(req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) return send(res, 400, { error: 'interaction does not match' });
  const { prompt, params } = details;
  if (action === undefined) {
    const forms = prompt.name === 'login'
      ? `<form method="post" action="/interaction/${uid}/login">`
        + '<input name="username"/><button>Sign in</button></form>'
      : `<form method="post" action="/interaction/${uid}/confirm"><button>Allow</button></form>`;
    const abort = `<form method="post" action="/interaction/${uid}/abort">`
      + '<button>Deny</button></form>';
    return send(res, 200, page(prompt.name, forms + abort), 'text/html');
  }
  const form = new URLSearchParams(await readBody(req));
  if (action === 'abort') {
    const result = { error: 'access_denied', error_description: 'the user denied the request' };
    return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }
  if (action === 'login' && prompt.name === 'login') {
    const username = form.get('username') || '';
    if (!Object.hasOwn(settings.users, username)) {
      return send(res, 400, page('login-failed', ''), 'text/html');
    }
    const result = { login: { accountId: username } };
    return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: false });
  }
  if (action === 'confirm' && prompt.name === 'consent') {
    const { details: missing } = prompt;
    const grant = details.grantId
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
    if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
    if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
    for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
      grant.addResourceScope(indicator, scopes.join(' '));
    }
    const result = { consent: { grantId: await grant.save() } };
    return provider.interactionFinished(req, res, result, { mergeWithLastSubmission: true });
  }
  return send(res, 400, { error: `cannot ${action} at prompt ${prompt.name}` });
}

function base64url(value) {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function mint(claims) {
  const now = Math.floor(Date.now() / 1000);
  const payload = { iss: issuer, iat: now, nbf: now, exp: now + 300, jti: randomUUID(), ...claims };
  for (const [name, value] of Object.entries(payload)) if (value === null) delete payload[name];
  const [current] = keys;
  const header = { alg: 'RS256', typ: 'JWT', kid: current.kid };
  const input = `${base64url(header)}.${base64url(payload)}`;
  const key = { key: current, format: 'jwk' };
  return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}

const polls = []; // {code, outcome}, in order
const pollState = new Map(); // hash of a device_code -> {last, interval}

// RFC 8628 §3.5 on the server side: a poll sooner than the interval is answered slow_down and
// the interval grows by 5 seconds; with slowDownFirst the first poll is answered so as well.
async function devicePoll(req, res, body) {
  const code = createHash('sha256').update(body.get('device_code') || '').digest('hex');
  const now = Date.now();
  const state = pollState.get(code) || { last: undefined, interval: settings.deviceInterval };
  pollState.set(code, state);
  const early = state.last !== undefined && now - state.last < state.interval * 1000;
  const first = state.last === undefined && settings.slowDownFirst;
  state.last = now;
  if (early || first) {
    state.interval += 5;
    polls.push({ code, outcome: 'slow_down' });
    return send(res, 400, { error: 'slow_down', error_description: 'polling too fast' });
  }
  const end = res.end.bind(res);
  res.end = (chunk, ...rest) => {
    let outcome = 'ok';
    try { outcome = JSON.parse(Buffer.from(chunk).toString('utf8')).error || 'ok'; } catch {}
    polls.push({ code, outcome });
    return end(chunk, ...rest);
  };
  req.body = body.toString(); // oidc-provider reads an already-read body from req.body
  return handle(req, res);
}

async function testRoute(req, res, route) {
  if (route === 'polls' && req.method === 'GET') return send(res, 200, polls);
  if (req.method !== 'POST') return send(res, 405, { error: 'POST only' });
  const text = await readBody(req);
  if (route === 'rotate') {
    keys = [newKey(), ...keys];
    rebuild();
    return send(res, 200, { kid: keys[0].kid, kids: keys.map((k) => k.kid) });
  }
  if (route === 'withdraw') {
    keys = keys.slice(0, 1);
    rebuild();
    return send(res, 200, { kids: keys.map((k) => k.kid) });
  }
  if (route === 'mint') return send(res, 200, { token: mint(JSON.parse(text || '{}')) });
  if (route === 'config') {
    Object.assign(settings, JSON.parse(text || '{}'));
    rebuild();
    return send(res, 200, settings);
  }
  return send(res, 404, { error: 'no such test route' });
}

const server = http.createServer(async (req, res) => {
  try {
    const url = new URL(req.url, issuer);
    const parts = url.pathname.split('/').filter(Boolean);
    if (parts[0] === 'test') return await testRoute(req, res, parts[1]);
    if (parts[0] === 'interaction' && parts.length <= 3) {
      if (parts.length === 3 && req.method !== 'POST') return send(res, 405, { error: 'POST' });
      return await interaction(req, res, parts[1], parts[2]);
    }
    if (url.pathname === '/token' && req.method === 'POST') {
      const body = new URLSearchParams(await readBody(req));
      if (body.get('grant_type') === DEVICE_GRANT) return await devicePoll(req, res, body);
      req.body = body.toString();
    }
    return handle(req, res);
  } catch (err) {
    if (!res.headersSent) send(res, 500, { error: 'server_error', error_description: String(err) });
    else res.destroy();
  }
});

server.listen(Number(argValue('--port', '0')), '127.0.0.1', () => {
  issuer = `http://127.0.0.1:${server.address().port}`;
  rebuild();
  process.stdout.write(`OIDC_ISSUER ${issuer}\n`);
});
for (const signal of ['SIGTERM', 'SIGINT']) process.on(signal, () => process.exit(0));
