// Live updates: a page follows a server-sent event stream (api.streamEvents) and reloads what
// it shows when an event says something changed; if the stream cannot be read (a server or a
// proxy without it, a dropped connection) the page polls instead, as before streams existed.
import * as api from '/ui/api.js';

// Calls `reload` (debounced by `debounceMs`) for each event `wants` accepts, from the stream at
// `path`; falls back to calling it every `pollMs` once the stream fails or ends. `onMode` is
// told 'stream' or 'polling'. Returns a stop function.
export function follow(path, {wants = () => true, reload, pollMs, debounceMs = 250, onMode = () => {}}) {
  let stopped = false;
  let pending = null;
  let timer = null;
  let stream = null;
  const schedule = () => {
    if (stopped || pending) return;
    pending = setTimeout(() => {
      pending = null;
      if (!stopped) reload().catch(() => {});
    }, debounceMs);
  };
  const poll = () => {
    if (stopped || timer) return;
    onMode('polling');
    timer = setInterval(() => { if (!stopped) reload().catch(() => {}); }, pollMs);
  };
  try {
    stream = api.streamEvents(path, (name, data) => {
      if (name === 'ready' || name === 'state') onMode('stream');
      else if (name === 'error') poll();
      else if (wants(name, data)) schedule();
    });
    stream.done.then(() => { if (!stopped) { schedule(); poll(); } },
                     (e) => { if (!stopped && !(e instanceof api.ApiError && e.status === 401)) poll(); });
  } catch (e) {
    poll();
  }
  return () => {
    stopped = true;
    if (stream) stream.controller.abort();
    clearTimeout(pending);
    clearInterval(timer);
  };
}
