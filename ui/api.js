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

// Server-sent events from `path`, read with fetch() rather than EventSource: EventSource cannot
// send an Authorization header, and the token must not travel in the address (it would land
// in logs and history). Calls onEvent(name, data) for each event (data parsed as JSON), and
// resolves when the stream ends; rejects when it cannot start (the caller then polls). Stop it
// with the returned controller's abort().
export function streamEvents(path, onEvent) {
  const controller = new AbortController();
  const headers = {Accept: 'text/event-stream'};
  if (token()) headers.Authorization = `Bearer ${token()}`;
  const done = (async () => {
    const response = await fetch(path, {headers, cache: 'no-store', credentials: 'omit',
                                        signal: controller.signal});
    if (response.status === 401) {
      onUnauthorized();
      throw new ApiError(401, 'this server needs an API token');
    }
    if (!response.ok || !response.body) throw new ApiError(response.status, `${path}: ${response.status}`);
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    for (;;) {
      const {value, done: ended} = await reader.read();
      if (ended) return;
      buffer += value.replace(/\r\n?/g, '\n');
      let cut;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        let name = 'message';
        const data = [];
        for (const line of block.split('\n')) {
          if (line.startsWith('event:')) name = line.slice(6).trim();
          else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
        }
        if (data.length === 0) continue;  // a keep-alive comment
        let parsed;
        try {
          parsed = JSON.parse(data.join('\n'));
        } catch (e) {
          parsed = data.join('\n');
        }
        onEvent(name, parsed);
      }
    }
  })();
  return {controller, done};
}
