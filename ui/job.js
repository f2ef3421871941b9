// One job (#/job/<id>): verdict and reason, checks and flags, correctness per trial, the
// timing of reference and candidate, the speedup with its interval, roofline, launched
// kernels, both sources, errors and tracebacks, and a diff against another job. A job that
// has not finished is read again at each of its progress events (GET /job/{id}/events), or
// every 2 s when that stream cannot be read.
import * as api from '/ui/api.js';
import {el, replace, pre, when, duration, num, table, facts, jsonTree, badge, stateBadge} from '/ui/dom.js';
import {timingPlot, speedupPlot, trialsPlot} from '/ui/plot.js';
import {highlighted} from '/ui/highlight.js';
import {follow} from '/ui/live.js';

const REFRESH_MS = 2000;
const TERMINAL = new Set(['success', 'failed', 'cancelled']);

function verdictOf(job, r) {
  if (job.state !== 'success') {
    return {text: job.state === 'running' || job.state === 'queued' ? job.state : `job ${job.state}`,
            kind: TERMINAL.has(job.state) ? 'bad' : 'live', reason: job.error || ''};
  }
  if (r.compiled === false) return {text: 'did not compile', kind: 'bad', reason: 'compilation_error below'};
  if (r.correctness === false) {
    return {text: 'incorrect', kind: 'bad', reason: r.error_kind ? `error_kind: ${r.error_kind}` : ''};
  }
  const fatal = (r.honesty || []).filter((h) => h.fatal);
  if (fatal.length) return {text: 'failed an honesty check', kind: 'bad', reason: fatal[0].code};
  return {text: 'correct', kind: 'ok', reason: r.speedup_verdict ? `speedup: ${r.speedup_verdict}` : ''};
}

function section(title, ...children) {
  const body = children.flat().filter(Boolean);
  if (body.length === 0) return null;
  return el('section', {}, el('h2', {}, title), body);
}

function checksTable(r) {
  const rows = [];
  for (const c of r.checks || []) {
    rows.push([c.name, c.passed ? badge('passed', 'ok') : badge('failed', 'bad'),
               c.fatal === false ? 'no' : 'yes', c.message || '']);
  }
  for (const h of r.honesty || []) rows.push([h.code, badge('failed', 'bad'), h.fatal ? 'yes' : 'no', h.message || '']);
  return rows.length ? table(['check', 'result', 'fatal', 'message'], rows, 'checks') : null;
}

function flagsTable(r) {
  const rows = [];
  for (const [side, flags] of [['candidate', r.timing_flags], ['reference', r.ref_timing_flags]]) {
    for (const f of flags || []) rows.push([side, f.code, f.message || '']);
  }
  return rows.length ? table(['side', 'flag', 'message'], rows, 'flags') : null;
}

function warnings(r) {
  return (r.warnings || []).length ? el('ul', {class: 'warnings'}, r.warnings.map((w) => el('li', {}, w))) : null;
}

function correctness(r) {
  const d = r.correctness_details;
  if (!d) return [];
  return [
    facts([['trials passed', `${d.trials_passed ?? '?'} / ${d.trials ?? '?'}`], ['atol', d.atol], ['rtol', d.rtol],
           ['max abs error', d.max_abs_error], ['max rel error', d.max_rel_error],
           ['mismatches', d.mismatch_count], ['elements', d.numel]]),
    trialsPlot(d.per_trial),
    d.first_mismatch ? el('p', {}, 'First mismatch: ', el('code', {}, JSON.stringify(d.first_mismatch))) : null,
  ];
}

function timing(job, r) {
  const refStats = r.ref_runtime_stats || job.ref_runtime_stats ||
                   (r.ref_runtime && typeof r.ref_runtime === 'object' && r.ref_runtime.median ? r.ref_runtime : null);
  const plot = timingPlot([
    {label: 'reference', stats: refStats, kernelTime: r.ref_kernel_time, cls: 'ref'},
    {label: 'candidate', stats: r.runtime_stats, kernelTime: r.kernel_time, cls: 'cand'}]);
  const rows = [];
  for (const [side, s] of [['reference', refStats], ['candidate', r.runtime_stats]]) {
    if (!s) continue;
    rows.push([side, num(s.median), num(s.mean), num(s.std), num(s.min), num(s.max), String(s.trials ?? ''),
               num(s.rse, 2), s.method || '', s.stop_reason || '']);
  }
  return [
    plot,
    rows.length ? table(['side', 'median ms', 'mean ms', 'std', 'min', 'max', 'trials', 'rse', 'method', 'stop'],
                        rows, 'timing') : null,
    facts([['kernel_time (candidate)', r.kernel_time], ['kernel_time (reference)', r.ref_kernel_time],
           ['idle gap ms (candidate)', r.idle_gap_ms], ['idle gap ms (reference)', r.ref_idle_gap_ms]]),
  ];
}

function speedup(r) {
  if (typeof r.speedup !== 'number') return [];
  const ci = Array.isArray(r.speedup_ci) ? `[${num(r.speedup_ci[0])}, ${num(r.speedup_ci[1])}]` : 'none';
  return [el('p', {class: 'speedup-line'}, el('strong', {}, `${num(r.speedup)}×`), ` 95 % interval ${ci} — `,
               badge(r.speedup_verdict || 'no verdict', r.speedup_verdict === 'faster' ? 'ok'
                 : r.speedup_verdict === 'slower' ? 'bad' : 'muted')),
          speedupPlot(r.speedup, r.speedup_ci)];
}

function roofline(r) {
  const parts = [];
  for (const [side, rf] of [['candidate', r.roofline], ['reference', r.ref_roofline]]) {
    if (!rf) continue;
    parts.push(el('h3', {}, side), rf.measured
      ? facts([['achieved GB/s', num(rf.achieved_gb_s)], ['peak GB/s', num(rf.peak_gb_s)],
               ['% of peak bandwidth', num(rf.pct_of_peak_bandwidth)], ['achieved TFLOP/s', num(rf.achieved_tflop_s)],
               ['% of peak FLOP/s', num(rf.pct_of_peak_flops)], ['bytes', rf.bytes_moved], ['bytes from', rf.bytes_source]])
      : el('p', {class: 'muted'}, `not measured: ${rf.reason || ''}`));
  }
  return parts;
}

function kernels(r) {
  const rows = [];
  for (const [side, list] of [['candidate', r.kernels], ['reference', r.ref_kernels]]) {
    for (const k of list || []) {
      rows.push([side, k.name, k.kind, JSON.stringify(k.grid ?? ''), JSON.stringify(k.block ?? ''), num(k.duration_ms)]);
    }
  }
  return rows.length ? table(['side', 'name', 'kind', 'grid', 'block', 'ms'], rows, 'kernels') : null;
}

function errors(job, r) {
  const out = [];
  for (const [label, text] of [['error', job.error], ['compilation_error', r.compilation_error],
    ['validation_error', r.validation_error], ['runtime_error', r.runtime_error],
    ['traceback', r.traceback], ['stderr', r.stderr], ['stdout', r.stdout]]) {
    if (text) out.push(el('h3', {}, label), pre(text, 'code error-text'));
  }
  return out;
}

function sources(job) {
  const req = job.request || {};
  const out = [];
  for (const [label, k] of [['reference', req.ref_kernel], ['candidate', req.custom_kernel], ['kernel', req.kernel]]) {
    if (!k) continue;
    out.push(el('h3', {}, `${label} (${k.kernel_type || '?'})`), highlighted(k.source_code, k.kernel_type));
  }
  return out;
}

function diffForm(job) {
  const form = el('form', {class: 'filters', id: 'diff-with'},
    el('label', {}, 'Diff the candidate\'s source against job ', el('input', {name: 'other', size: 34, required: true})),
    el('button', {type: 'submit'}, 'Diff'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams({a: form.elements.other.value.trim(), b: job.job_id});
    location.hash = `#/diff?${q}`;
  });
  return form;
}

function render(main, job) {
  const r = job.kernel_exec_result || {};
  const v = verdictOf(job, r);
  const meta = r.metadata || {};
  const req = job.request || {};
  const asked = ((req.custom_kernel || req.kernel || {}).metadata) || {};
  const kernelName = meta.kernel_name || asked.kernel_name || asked.entry_point;
  replace(main,
    el('h1', {}, 'Job ', el('span', {class: 'mono', id: 'job-id'}, job.job_id)),
    el('p', {class: 'verdict'}, badge(v.text, v.kind), ' ', el('span', {id: 'verdict-reason'}, v.reason)),
    facts([['state', stateBadge(job.state)], ['phase', job.phase], ['kind', job.kind], ['device', job.device],
           ['kernel', kernelName], ['kernel type', meta.kernel_type || (req.custom_kernel || req.kernel || {}).kernel_type], ['attempts', job.attempts],
           ['created', when(job.created_at)], ['started', when(job.started_at)], ['finished', when(job.finished_at)],
           ['took', job.finished_at && job.started_at ? duration(job.finished_at - job.started_at) : '']]),
    section('Speedup', speedup(r)),
    section('Errors', errors(job, r)),
    section('Checks', checksTable(r)),
    section('Timing flags', flagsTable(r)),
    section('Warnings', warnings(r)),
    section('Correctness', correctness(r)),
    section('Timing', timing(job, r)),
    section('Roofline', roofline(r)),
    section('Launched kernels', kernels(r)),
    section('Sources', sources(job), diffForm(job)),
    section('Everything else', el('details', {}, el('summary', {}, 'the whole result as JSON'), jsonTree(r))));
}

export async function jobPage(main, id) {
  const load = async () => {
    const job = await api.getJson(`/job/${encodeURIComponent(id)}`, {include: 'request'});
    render(main, job);
    return TERMINAL.has(job.state);
  };
  if (await load()) return null;
  let stop = null;
  let finished = false;
  const reload = async () => {
    if (finished) return;
    finished = await load();
    if (finished && stop) stop();
  };
  stop = follow(`/job/${encodeURIComponent(id)}/events`, {
    reload, pollMs: REFRESH_MS, debounceMs: 100,
    wants: (name) => name === 'progress' || name === 'done',
    onMode: (mode) => { main.dataset.live = mode; },
  });
  return () => stop();
}
