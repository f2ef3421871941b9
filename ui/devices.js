// Devices (#/devices), from GET /stats, GET /health and GET /metrics: each device with its
// workers, gate, warm-ups and utilisation; the queue, the jobs by state and the throughput;
// the highlights of the Prometheus metrics. Read again every 5 s.
import * as api from '/ui/api.js';
import {el, replace, facts, jsonTree, num, table, badge} from '/ui/dom.js';

const REFRESH_MS = 5000;

function workers(device) {
  const w = device.workers;
  if (!w || typeof w !== 'object') return '';
  return el('span', {}, Object.entries(w).map(([name, state]) => {
    const text = typeof state === 'string' ? state : (state && state.state) || JSON.stringify(state);
    return [badge(`${name}: ${text}`, text === 'ready' ? 'ok' : text === 'failed' ? 'bad' : 'muted'), ' '];
  }));
}

function gate(device) {
  const g = device.device_gate;
  if (!g || typeof g !== 'object') return '';
  return facts([['holder', g.holder === null || g.holder === undefined ? 'free' : String(g.holder)],
                ['waiting', g.waiting ?? g.waiters], ['grants', g.grants],
                ['warming now', g.warming], ['warmed', g.warmed], ['warming pauses', g.warming_pauses]]);
}

function deviceCard(device, health) {
  const util = device.utilization ?? device.utilisation;
  return el('section', {class: 'device'},
    el('h2', {}, device.name || device.device || '?'),
    facts([['workers', workers(device.workers ? device : health || {})],
           ['busy', device.busy === undefined ? '' : String(device.busy)],
           ['queued', device.queued], ['running', device.running],
           ['utilisation', typeof util === 'number' ? `${num(util * (util <= 1 ? 100 : 1), 3)} %` : ''],
           ['jobs run', device.jobs_run ?? device.jobs_completed]]),
    el('h3', {}, 'Gate and warm pool'), gate(device),
    el('details', {}, el('summary', {}, 'all of this device\'s counters'), jsonTree(device)));
}

// The Prometheus text format (GET /metrics) as [{name, labels: {k: v}, value}]; comments and
// lines it cannot read are skipped.
export function parseMetrics(text) {
  const out = [];
  const line = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
  const label = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\.|[^"\\])*)"/g;
  for (const raw of String(text).split('\n')) {
    if (raw.startsWith('#')) continue;
    const m = raw.match(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || '').matchAll(label)) labels[l[1]] = l[2].replace(/\\(.)/g, '$1');
    const value = Number(m[3]);
    if (!Number.isNaN(value)) out.push({name: m[1], labels, value});
  }
  return out;
}

function sum(metrics, name, where = () => true) {
  return metrics.filter((m) => m.name === name && where(m.labels)).reduce((t, m) => t + m.value, 0);
}

// A histogram's mean (sum / count), for the samples whose labels `where` accepts.
function meanOf(metrics, name, where = () => true) {
  const count = sum(metrics, `${name}_count`, where);
  return count > 0 ? sum(metrics, `${name}_sum`, where) / count : null;
}

function metricsHighlights(metrics) {
  if (!metrics) return el('p', {class: 'muted'}, 'GET /metrics is not available.');
  const finished = sum(metrics, 'kforge_jobs_finished_total');
  const byState = (s) => sum(metrics, 'kforge_jobs_finished_total', (l) => l.state === s);
  const runMean = meanOf(metrics, 'kforge_job_run_seconds');
  const phases = [...new Set(metrics.filter((m) => m.name === 'kforge_job_phase_seconds_count').map((m) => m.labels.phase))];
  const devices = [...new Set(metrics.filter((m) => m.name === 'kforge_device_jobs_total').map((m) => m.labels.device))];
  const uptime = sum(metrics, 'kforge_uptime_seconds');
  return el('div', {id: 'metrics-highlights'},
    table(['submitted', 'finished', 'success', 'failed', 'cancelled', 'recovered', 'queue depth',
           'worker restarts', 'child crashes', 'mean run (s)'],
          [[String(sum(metrics, 'kforge_jobs_submitted_total')), String(finished), String(byState('success')),
            String(byState('failed')), String(byState('cancelled')), String(sum(metrics, 'kforge_jobs_recovered_total')),
            String(sum(metrics, 'kforge_queue_depth')), String(sum(metrics, 'kforge_worker_restarts_total')),
            String(sum(metrics, 'kforge_worker_child_crashes_total')), num(runMean)]], 'metrics'),
    devices.length ? table(['device', 'busy now', 'jobs run', 'busy (s)', 'utilisation since start'],
      devices.map((d) => {
        const busy = sum(metrics, 'kforge_device_busy_seconds_total', (l) => l.device === d);
        return [d, sum(metrics, 'kforge_device_busy', (l) => l.device === d) ? badge('busy', 'live') : badge('idle', 'muted'),
                String(sum(metrics, 'kforge_device_jobs_total', (l) => l.device === d)), num(busy),
                uptime > 0 ? `${num(100 * busy / uptime)} %` : '—'];
      }), 'metrics-devices') : null,
    phases.length ? table(['phase', 'jobs', 'mean (s)'], phases.map((p) => [p,
      String(sum(metrics, 'kforge_job_phase_seconds_count', (l) => l.phase === p)),
      num(meanOf(metrics, 'kforge_job_phase_seconds', (l) => l.phase === p))]), 'metrics-phases') : null);
}

function render(main, stats, health, metrics) {
  const byName = new Map((health.devices || []).map((d) => [d.name, d]));
  const t = stats.throughput || {};
  const q = stats.queue || {};
  const jobs = stats.jobs || {};
  replace(main,
    el('h1', {}, 'Devices'),
    el('p', {class: 'muted', id: 'devices-status'}, `${health.status || ''} · kforge ${stats.version || ''} · ` +
      `up ${Math.round(stats.uptime_s || 0)} s · updated ${new Date().toLocaleTimeString()}`),
    el('section', {},
      el('h2', {}, 'Queue and throughput'),
      table(['queued or running', 'bytes', 'clients', 'max jobs', 'recent jobs/min', 'completed', 'failed'],
            [[String(q.jobs ?? stats.queue_depth ?? ''), String(q.bytes ?? ''), String(q.clients ?? ''),
              String(q.max_jobs ?? ''), num(t.recent_throughput_per_minute),
              String(t.completed_requests ?? ''), String(t.failed_requests ?? '')]], 'queue'),
      table(Object.keys(jobs), [Object.values(jobs).map(String)], 'job-states')),
    el('div', {class: 'devices', id: 'devices'},
      (stats.devices || []).map((d) => deviceCard(d, byName.get(d.name)))),
    el('section', {}, el('h2', {}, 'Metrics (GET /metrics)'), metricsHighlights(metrics)));
}

export async function devicesPage(main) {
  const load = async () => {
    const [stats, health, metrics] = await Promise.all([api.getJson('/stats'), api.getJson('/health'),
      api.get('/metrics').then((r) => r.text()).then(parseMetrics).catch(() => null)]);
    render(main, stats, health, metrics);
  };
  await load();
  const timer = setInterval(() => load().catch(() => {}), REFRESH_MS);
  return () => clearInterval(timer);
}
