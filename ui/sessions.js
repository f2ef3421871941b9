// Workbench sessions (#/sessions, #/session/<id>), from GET /workbench/sessions: the list with
// a state filter and cursor pagination; a session's state, its versions with their results
// (correctness, time, speedup with its interval and verdict per size), a line diff between
// two versions, and its development log rendered from Markdown (ui/markdown.js, text only).
import * as api from '/ui/api.js';
import {el, replace, when, num, table, facts, badge, jsonTree} from '/ui/dom.js';
import {diffView} from '/ui/diff.js';
import {highlighted} from '/ui/highlight.js';
import {markdown} from '/ui/markdown.js';

const STATES = ['', 'start', 'write', 'evaluation', 'end'];

function correctBadge(correct) {
  if (correct === true) return badge('correct', 'ok');
  if (correct === false) return badge('incorrect', 'bad');
  return badge('not evaluated', 'muted');
}

function sessionLink(id) {
  return el('a', {href: `#/session/${encodeURIComponent(id)}`, class: 'session-link mono'}, id);
}

export async function sessionsPage(main, _arg, params) {
  const state = params.get('state') || '';
  const cursor = params.get('cursor') || '';
  const form = el('form', {class: 'filters', id: 'session-filters'},
    el('label', {}, 'State ', el('select', {name: 'state'},
      STATES.map((s) => el('option', {value: s, selected: s === state || null}, s || 'any')))),
    el('button', {type: 'submit'}, 'Filter'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    if (form.elements.state.value) next.set('state', form.elements.state.value);
    location.hash = `#/sessions${next.toString() ? '?' + next : ''}`;
  });
  let page;
  try {
    page = await api.getJson('/workbench/sessions', {state, cursor, limit: params.get('limit') || 25});
  } catch (e) {
    if (!(e instanceof api.ApiError) || e.status !== 404) throw e;
    replace(main, el('h1', {}, 'Workbench sessions'), el('p', {class: 'muted'},
      'This server does not serve the workbench (it runs without MCP: --mode rest).'));
    return null;
  }
  const rows = page.sessions.map((s) => [
    sessionLink(s.session_id), s.kernel_name || '—', badge(s.state, s.state === 'end' ? 'ok' : 'live'),
    s.owner || '', s.device || '', String(s.versions ?? ''), String(s.correct_versions ?? ''),
    s.best_version ? `v${s.best_version}` : '—', num(s.best_time_ms),
    typeof s.best_speedup === 'number' ? `${num(s.best_speedup)}×` : '—', when(s.updated_at),
    s.error ? el('span', {class: 'error-text'}, s.error) : '']);
  const links = [];
  if (cursor) links.push(el('a', {href: `#/sessions${state ? '?state=' + encodeURIComponent(state) : ''}`, id: 'newest'}, '« Newest'));
  if (page.next_cursor) {
    const next = new URLSearchParams(params);
    next.set('cursor', page.next_cursor);
    links.push(el('a', {href: `#/sessions?${next}`, id: 'older'}, 'Older »'));
  }
  replace(main, el('h1', {}, 'Workbench sessions'), form,
    el('p', {class: 'muted'}, 'Sessions of the Triton workbench (its MCP tools write them; here they are read only).'),
    rows.length ? table(['session', 'kernel', 'state', 'owner', 'device', 'versions', 'correct',
                         'best', 'best time (ms)', 'speedup', 'updated', ''], rows, 'sessions')
                : el('p', {class: 'muted empty'}, 'No sessions.'),
    el('div', {class: 'pager'}, links));
  return null;
}

// Per size of a version's latest benchmark: the speedup, its 95 % interval and the verdict.
function benchmarkCases(v) {
  const b = (v.results || {}).benchmark;
  if (!b || !Array.isArray(b.cases) || b.cases.length === 0) return null;
  return table(['size', 'median (ms)', 'speedup', '95 % interval', 'verdict', 'error'],
    b.cases.map((c) => {
      const ci = Array.isArray(c.speedup_ci) ? `${num(c.speedup_ci[0])} – ${num(c.speedup_ci[1])}` : '';
      return [c.label || '', num((c.timing || {}).median_ms), typeof c.speedup === 'number' ? `${num(c.speedup)}×` : '—',
              ci, c.speedup_verdict || c.verdict || '', c.error ? el('span', {class: 'error-text'}, c.error) : ''];
    }), 'cases');
}

function versionsTable(session) {
  return table(['version', 'verdict', 'time (ms)', 'speedup', 'from', 'file', 'written'],
    session.versions.map((v) => [
      el('span', {}, `v${v.version}`, v.best ? [' ', badge('best', 'ok')] : '', v.ties_best ? [' ', badge('ties best', 'warn')] : ''),
      correctBadge(v.correct),
      typeof v.time_ms === 'number' ? `${num(v.time_ms, 4)} ± ${num(v.time_se_ms, 2)}` : '—',
      typeof v.speedup === 'number' ? `${num(v.speedup)}×` : '—',
      v.time_source || '', el('span', {class: 'mono'}, v.file), when(v.created_at)]), 'versions');
}

function versionDetails(v) {
  return el('details', {class: 'version', id: `version-${v.version}`},
    el('summary', {}, `v${v.version} — ${v.file}`),
    benchmarkCases(v),
    highlighted(v.source, 'python'),
    el('details', {}, el('summary', {}, 'results as JSON'), jsonTree(v.results)));
}

function diffForm(session, a, b, out) {
  const pick = (name, value) => el('select', {name},
    session.versions.map((v) => el('option', {value: String(v.version), selected: v.version === value || null}, `v${v.version}`)));
  const form = el('form', {class: 'filters', id: 'version-diff'},
    el('label', {}, 'From ', pick('a', a)), el('label', {}, 'To ', pick('b', b)),
    el('button', {type: 'submit'}, 'Diff versions'));
  const show = () => {
    const va = session.versions.find((v) => String(v.version) === form.elements.a.value);
    const vb = session.versions.find((v) => String(v.version) === form.elements.b.value);
    if (va && vb) replace(out, diffView(va.source, vb.source));
  };
  form.addEventListener('submit', (event) => { event.preventDefault(); show(); });
  return {form, show};
}

export async function sessionPage(main, id) {
  const s = await api.getJson(`/workbench/sessions/${encodeURIComponent(id)}`);
  const diffOut = el('div', {id: 'version-diff-out'});
  const n = s.versions.length;
  const diff = n >= 2 ? diffForm(s, s.versions[n - 2].version, s.versions[n - 1].version, diffOut) : null;
  const errors = (s.last_errors || []).map((e) => [when(e.at_ms / 1000), e.tool || '',
    e.version ? `v${e.version}` : '', el('span', {class: 'error-text'}, e.error || '')]);
  replace(main,
    el('h1', {}, 'Session ', el('span', {class: 'mono', id: 'session-id'}, s.session_id)),
    facts([['kernel', s.kernel_name], ['state', badge(s.state, s.state === 'end' ? 'ok' : 'live')],
           ['owner', s.owner], ['device', s.device], ['versions', `${s.versions.length} (at least ${s.min_versions} before the end)`],
           ['best', s.best_version ? `v${s.best_version}` : ''],
           ['ties with the best', (s.tied_with_best || []).map((v) => `v${v}`).join(', ')],
           ['cannot end yet', s.end_blocker],
           ['context', s.context ? `${s.context.tokens} of ${s.context.budget_tokens} tokens, ${s.context.calls} calls (context #${s.context.epoch})` : ''],
           ['created', when(s.created_at)], ['updated', when(s.updated_at)]]),
    el('section', {}, el('h2', {}, 'Versions'), n ? versionsTable(s) : el('p', {class: 'muted'}, 'No version written yet.'),
      s.versions.map(versionDetails)),
    diff ? el('section', {}, el('h2', {}, 'Diff between versions'), diff.form, diffOut) : null,
    errors.length ? el('section', {}, el('h2', {}, 'Last errors'), table(['when', 'tool', 'version', 'error'], errors)) : null,
    el('section', {id: 'session-log'}, el('h2', {}, 'Development log'),
      s.log ? markdown(s.log) : el('p', {class: 'muted'}, 'No log yet (the session has no kernel name).')),
    (s.history || []).length ? el('section', {}, el('h2', {}, 'State changes'),
      table(['when', 'from', 'to', 'why'], s.history.map((h) => [when(h.at_ms / 1000), h.from || '', h.to || '', h.why || '']))) : null);
  if (diff) diff.show();
  return null;
}
