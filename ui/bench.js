// Bench reports (#/bench, #/bench/<report id>), from GET /bench/reports: the reports this
// server kept of POST /bench, and one report: per op its kernels'
// times per size as a chart and a table (correct, mean per size, Final, speedup with its 95 %
// interval and verdict), the best and how close it comes to the peak, its development log, and
// the summary.
import * as api from '/ui/api.js';
import {el, replace, when, num, table, facts, badge} from '/ui/dom.js';
import {barsPlot} from '/ui/plot.js';
import {markdown} from '/ui/markdown.js';

function reportLink(id) {
  return el('a', {href: `#/bench/${encodeURIComponent(id)}`, class: 'report-link mono'}, id);
}

function bestText(op) {
  if (!op.best) return '—';
  const s = typeof op.speedup === 'number' ? ` ${num(op.speedup)}×` : '';
  return `${op.best}${s}${op.speedup_verdict ? ' (' + op.speedup_verdict + ')' : ''}`;
}

async function reportsList(main, params) {
  const cursor = params.get('cursor') || '';
  const page = await api.getJson('/bench/reports', {cursor, limit: params.get('limit') || 25});
  const rows = page.reports.map((r) => [
    reportLink(r.report_id), when(r.created_at), r.submitter || '', r.device + (r.device_name ? ` (${r.device_name})` : ''),
    (r.sizes || []).join(', '),
    el('span', {}, (r.ops || []).map((op) => [el('strong', {}, op.op), ': ', bestText(op), el('br', {})]))]);
  const links = [];
  if (cursor) links.push(el('a', {href: '#/bench', id: 'newest'}, '« Newest'));
  if (page.next_cursor) links.push(el('a', {href: `#/bench?cursor=${encodeURIComponent(page.next_cursor)}`, id: 'older'}, 'Older »'));
  replace(main, el('h1', {}, 'Bench reports'),
    el('p', {class: 'muted'}, 'The reports of POST /bench that this server kept (the latest of each submitter).'),
    rows.length ? table(['report', 'finished', 'submitter', 'device', 'sizes', 'best per op'], rows, 'reports')
                : el('p', {class: 'muted empty'}, 'No bench reports yet.'),
    el('div', {class: 'pager'}, links));
}

function speedupCell(x) {
  if (typeof x.speedup !== 'number') return '—';
  const ci = Array.isArray(x.speedup_ci) ? ` [${num(x.speedup_ci[0])}, ${num(x.speedup_ci[1])}]` : '';
  return `${num(x.speedup)}×${ci}`;
}

function opSection(op, sizes, files) {
  const rows = op.rows || [];
  const chart = barsPlot(sizes.map((size) => ({
    label: `${size}${op.sizes && op.sizes[size] && op.sizes[size].label ? ' · ' + op.sizes[size].label : ''}`,
    bars: rows.map((r) => {
      const cell = (r.sizes || {})[size] || {};
      return {label: r.kernel, value: cell.mean_ms, cls: r.kind === 'baseline' ? 'baseline' : (r.correct ? 'ok' : 'bad'),
              note: typeof cell.speedup === 'number' ? `${num(cell.speedup)}×` : ''};
    })})), `${op.op}: mean time per size and kernel`);
  const tableRows = rows.map((r) => [
    el('span', {}, r.kernel, op.best && op.best.kernel === r.kernel ? [' ', badge('best', 'ok')] : ''),
    r.kind || '', r.correct ? badge('correct', 'ok') : badge(r.error_kind || 'incorrect', 'bad'),
    ...sizes.map((size) => num(((r.sizes || {})[size] || {}).mean_ms, 4)),
    num(r.final_ms, 4), speedupCell(r), r.speedup_verdict || '',
    r.error ? el('span', {class: 'error-text'}, r.error) : '']);
  const best = op.best || {};
  const large = best.large || {};
  return el('section', {class: 'bench-op'},
    el('h2', {}, `${op.title || op.op} · ${op.dtype || ''}`),
    facts([['bound', op.bound], ['reference', op.reference ? el('code', {}, op.reference) : ''],
           ['kernels', op.kernels], ['best', best.kernel ? `${best.kernel} (${speedupCell(best)}, ${best.speedup_verdict || ''})` : (best.reason || '')],
           ['ties with the best', (best.tied_with || []).join(', ')],
           ['vs torch.compile', typeof best.speedup_vs_compile === 'number' ? `${num(best.speedup_vs_compile)}×` : ''],
           ['at the large size', typeof large.percent_of_peak === 'number'
             ? `${num(large.achieved)} ${large.unit || ''} = ${num(large.percent_of_peak)} % of ${num(large.peak)}` : (large.reason || '')]]),
    chart,
    table(['kernel', 'kind', 'correct', ...sizes.map((s) => `${s} mean (ms)`), 'Final (ms)', 'speedup [95 %]', 'verdict', 'error'],
          tableRows, 'bench-rows'),
    typeof files[`${op.op}_log.md`] === 'string'
      ? el('details', {class: 'bench-log'}, el('summary', {}, `${op.op}_log.md, the development log`),
        markdown(files[`${op.op}_log.md`]))
      : null);
}

async function reportPage(main, id) {
  const r = await api.getJson(`/bench/reports/${encodeURIComponent(id)}`);
  const report = r.report || {};
  const sizes = report.sizes || [];
  const summary = (r.files || {})['summary.md'];
  replace(main,
    el('h1', {}, 'Bench report ', el('span', {class: 'mono', id: 'report-id'}, r.report_id)),
    facts([['device', `${report.device || ''}${report.device_name ? ' (' + report.device_name + ')' : ''}`],
           ['note', report.timing_note || (report.interpreter ? 'Triton interpreter: CPU timings, not comparable with GPU ones' : '')],
           ['runs per size', report.runs], ['correctness trials', report.correct_trials],
           ['sizes', sizes.join(', ')], ['submitter', r.submitter], ['started', report.started_at], ['finished', report.finished_at],
           ['kforge', report.kforge_version]]),
    (report.ops || []).map((op) => opSection(op, sizes, r.files || {})),
    summary ? el('section', {id: 'bench-summary'}, el('h2', {}, 'Summary'), markdown(summary)) : null);
}

export async function benchPage(main, arg, params) {
  if (arg) await reportPage(main, arg);
  else await reportsList(main, params);
  return null;
}
