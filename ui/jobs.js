// The front page: the most recent jobs (GET /jobs), with filters, cursor pagination, a JSON
// Lines export and live updates: the first page is read again when GET /jobs/events says a
// job changed (ui/live.js), or every few seconds when that stream cannot be read.
import * as api from '/ui/api.js';
import {el, replace, when, duration, num, table, stateBadge, badge} from '/ui/dom.js';
import {follow} from '/ui/live.js';

const REFRESH_MS = 3000;
const STATES = ['', 'queued', 'running', 'success', 'failed', 'cancelled'];
const KERNEL_TYPES = ['', 'torch', 'torch_cuda', 'triton', 'cuda', 'multi_kernel'];
const FILTERS = ['status', 'kernel_type', 'device', 'submitter', 'since', 'until'];

// datetime-local text ("2026-11-25T21:38") <-> Unix epoch seconds, in the browser's zone.
function toEpoch(local) {
  const ms = Date.parse(local);
  return Number.isNaN(ms) ? '' : String(ms / 1000);
}
function toLocal(epoch) {
  if (!epoch) return '';
  const d = new Date(Number(epoch) * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

function verdict(job) {
  if (job.state !== 'success') return job.error ? el('span', {class: 'error-text'}, job.error) : '';
  if (job.compiled === false) return badge('did not compile', 'bad');
  if (job.correctness === false) return badge(job.error_kind || 'incorrect', 'bad');
  if (job.correctness === true) {
    const parts = [badge('correct', 'ok')];
    if (typeof job.speedup === 'number') {
      parts.push(' ', el('span', {class: 'speedup'}, `${num(job.speedup)}×`));
      if (job.speedup_verdict) parts.push(' ', el('span', {class: 'muted'}, job.speedup_verdict));
    }
    return el('span', {}, parts);
  }
  return job.error_kind ? badge(job.error_kind, 'warn') : '';
}

function row(job) {
  const took = job.finished_at && job.started_at ? duration(job.finished_at - job.started_at) : '';
  return [
    el('a', {href: `#/job/${encodeURIComponent(job.job_id)}`, class: 'job-link mono'}, job.job_id),
    el('span', {}, stateBadge(job.state), job.phase ? el('span', {class: 'muted'}, ' ', job.phase) : ''),
    job.kind,
    job.kernel_type || '',
    job.device,
    job.submitter || '',
    when(job.created_at),
    took,
    verdict(job),
  ];
}

function filterForm(params, onChange) {
  const select = (name, options) => el('select', {name},
    options.map((o) => el('option', {value: o, selected: params.get(name) === o || null}, o || 'any')));
  const text = (name, placeholder) =>
    el('input', {name, type: 'text', value: params.get(name) || '', placeholder});
  const time = (name) =>
    el('input', {name, type: 'datetime-local', value: toLocal(params.get(name))});
  const form = el('form', {class: 'filters', id: 'job-filters'},
    el('label', {}, 'Status ', select('status', STATES)),
    el('label', {}, 'Kernel type ', select('kernel_type', KERNEL_TYPES)),
    el('label', {}, 'Device ', text('device', 'cpu, cuda:0')),
    el('label', {}, 'Submitter ', text('submitter', 'name')),
    el('label', {}, 'Since ', time('since')),
    el('label', {}, 'Until ', time('until')),
    el('button', {type: 'submit'}, 'Filter'),
    el('button', {type: 'reset'}, 'Clear'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const next = new URLSearchParams();
    for (const name of FILTERS) {
      let value = form.elements[name].value.trim();
      if (name === 'since' || name === 'until') value = value ? toEpoch(value) : '';
      if (value) next.set(name, value);
    }
    onChange(next);
  });
  form.addEventListener('reset', (event) => {
    event.preventDefault();
    onChange(new URLSearchParams());
  });
  return form;
}

export async function jobsPage(main, _arg, params) {
  const filters = {};
  for (const name of FILTERS) if (params.get(name)) filters[name] = params.get(name);
  const cursor = params.get('cursor') || '';
  const go = (next) => { location.hash = `#/jobs${next.toString() ? '?' + next : ''}`; };

  const status = el('p', {class: 'muted', id: 'jobs-status'});
  const body = el('div', {id: 'jobs-table'});
  const pager = el('div', {class: 'pager'});
  const exportButton = el('button', {type: 'button', id: 'export-jsonl'}, 'Export JSON Lines');
  exportButton.addEventListener('click', async () => {
    const response = await api.get('/jobs', {...filters, cursor, limit: 500, format: 'jsonl'});
    const url = URL.createObjectURL(await response.blob());
    const a = el('a', {href: url, download: 'kforge-jobs.jsonl'});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  });
  replace(main, el('h1', {}, 'Jobs'), filterForm(params, go), exportButton, status, body, pager);

  async function load() {
    const page = await api.getJson('/jobs', {...filters, cursor, limit: params.get('limit') || 25});
    if (page.jobs.length === 0) {
      replace(body, el('p', {class: 'muted empty'}, 'No jobs match.'));
    } else {
      replace(body, table(['job', 'state', 'kind', 'kernel type', 'device', 'submitter', 'created',
        'took', 'verdict'], page.jobs.map(row), 'jobs'));
    }
    const links = [];
    if (cursor) {
      const first = new URLSearchParams(params);
      first.delete('cursor');
      links.push(el('a', {href: `#/jobs${first.toString() ? '?' + first : ''}`, id: 'newest'}, '« Newest'));
    }
    if (page.next_cursor) {
      const next = new URLSearchParams(params);
      next.set('cursor', page.next_cursor);
      links.push(el('a', {href: `#/jobs?${next}`, id: 'older'}, 'Older »'));
    }
    replace(pager, links);
    replace(status, cursor ? 'An older page (not updated live).'
                           : `Updated ${new Date().toLocaleTimeString()}; ${live}.`);
  }

  let live = 'live';
  await load();
  if (cursor) return null;  // later pages stay put; the first follows new jobs
  const reload = () => load().catch((e) => replace(status, el('span', {class: 'error'}, e.message)));
  return follow('/jobs/events', {
    reload, pollMs: REFRESH_MS,
    onMode: (mode) => {
      live = mode === 'stream' ? 'live (server-sent events)' : `read again every ${REFRESH_MS / 1000} s`;
      main.dataset.live = mode;
      reload();
    },
  });
}
