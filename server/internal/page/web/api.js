// The page's one way to call the /v1 API: JSON in and out, the bearer
// token from localStorage when there is one, and errors as ApiError with
// the API's {"error": {"code", "message"}}.

const tokenKey = 'promptkit.token';

// In loopback mode the server wants no token: a stale one kept from
// another time would only get the page refused.
let sendToken = true;
export function withoutToken() { sendToken = false; }

export function getToken() {
  try { return localStorage.getItem(tokenKey) || ''; } catch { return ''; }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(tokenKey, token); else localStorage.removeItem(tokenKey);
  } catch { /* storage disabled: the token lasts until the tab closes */ }
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status; // 0: no answer (network down, server stopped)
    this.code = code;
  }
}

// Listeners told about every 401, so the page can ask for a token.
const unauthorized = new Set();
export function onUnauthorized(fn) { unauthorized.add(fn); }

export async function api(method, path, body, headers = {}) {
  const h = { ...headers };
  const token = sendToken && getToken();
  if (token) h.Authorization = 'Bearer ' + token;
  if (body !== undefined) h['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    throw new ApiError(0, 'network', 'The server cannot be reached.');
  }
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const e = data && data.error ? data.error : { code: 'http_' + res.status, message: res.statusText };
    if (res.status === 401) unauthorized.forEach((fn) => fn());
    throw new ApiError(res.status, e.code, e.message);
  }
  return data;
}
