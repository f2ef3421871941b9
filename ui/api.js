// The REST API, read with the token this tab was given (sessionStorage), sent as
// `Authorization: Bearer` like any other client. A 401 asks for the token again.

const TOKEN_KEY = 'kforge.token';

export class ApiError extends Error {
  constructor(status, message, field) {
    super(message);
    this.status = status;
    this.field = field;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || '';
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

let onUnauthorized = () => {};
export function whenUnauthorized(callback) {
  onUnauthorized = callback;
}

// GET `path` (with `params`, skipping empty ones) and the response; throws ApiError.
export async function get(path, params) {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') query.set(k, String(v));
  }
  const url = path + (query.toString() ? `?${query}` : '');
  const headers = {};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const response = await fetch(url, {headers, cache: 'no-store', credentials: 'omit'});
  if (response.status === 401) {
    onUnauthorized();
    throw new ApiError(401, 'this server needs an API token');
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    let field;
    try {
      const body = await response.json();
      message = body.detail || body.error || message;
      field = body.field;
    } catch (e) {
      // not JSON: keep the status line
    }
    throw new ApiError(response.status, message, field);
  }
  return response;
}

export async function getJson(path, params) {
  return (await get(path, params)).json();
}
