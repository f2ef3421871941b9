// Devices (#/devices), from GET /stats and GET /health: each device with its workers, gate,
// warm-ups and utilisation; the queue, the jobs by state and the throughput. Read again
// every 5 s.
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

function render(main, stats, health) {
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
      (stats.devices || []).map((d) => deviceCard(d, byName.get(d.name)))));
}

export async function devicesPage(main) {
  const load = async () => {
    const [stats, health] = await Promise.all([api.getJson('/stats'), api.getJson('/health')]);
    render(main, stats, health);
  };
  await load();
  const timer = setInterval(() => load().catch(() => {}), REFRESH_MS);
  return () => clearInterval(timer);
}
