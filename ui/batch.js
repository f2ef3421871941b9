// A batch (#/batch/<id>, GET /batch/{id}): its candidates ranked by speedup, candidates whose
// speedup intervals overlap (speedup_verdict "indistinguishable" against each other) shown
// as ties, each linking to its job. Batches live in the server's memory only.
import * as api from '/ui/api.js';
import {el, replace, num, table, badge, stateBadge} from '/ui/dom.js';

const REFRESH_MS = 3000;

// Candidates in rank order with their rank; a candidate whose interval overlaps the previous
// one's shares its rank (a tie: the measurement cannot tell them apart).
export function rank(entries) {
  const scored = entries.map((e) => {
    const r = (e.result && e.result.kernel_exec_result) || {};
    const ok = r.compiled !== false && r.correctness === true;
    return {...e, ok, speedup: ok && typeof r.speedup === 'number' ? r.speedup : null,
            ci: Array.isArray(r.speedup_ci) ? r.speedup_ci : null, verdict: r.speedup_verdict, r};
  });
  scored.sort((a, b) => (b.speedup ?? -1) - (a.speedup ?? -1));
  let place = 0;
  scored.forEach((s, i) => {
    const prev = scored[i - 1];
    const tie = prev && s.speedup !== null && prev.speedup !== null && s.ci && prev.ci &&
                s.ci[1] >= prev.ci[0];
    if (!tie) place = i + 1;
    s.rank = s.speedup === null ? null : place;
    s.tie = Boolean(tie) || Boolean(scored[i + 1] && scored[i + 1].speedup !== null && s.ci &&
                                    scored[i + 1].ci && scored[i + 1].ci[1] >= s.ci[0]);
  });
  return scored;
}

export async function batchPage(main, id) {
  if (!id) {
    const form = el('form', {class: 'filters'},
      el('label', {}, 'Batch id ', el('input', {name: 'id', size: 40, required: true})),
      el('button', {type: 'submit'}, 'Show'));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      location.hash = `#/batch/${encodeURIComponent(form.elements.id.value.trim())}`;
    });
    replace(main, el('h1', {}, 'Batch'), el('p', {class: 'muted'},
      'A batch of POST /batch (kept in the server\'s memory until it restarts).'), form);
    return null;
  }
  const load = async () => {
    const batch = await api.getJson(`/batch/${encodeURIComponent(id)}`);
    const entries = (batch.jobs || []).map((j, i) => ({...j, result: (batch.results || [])[i]}));
    const rows = rank(entries).map((s) => [
      s.rank === null ? '—' : `${s.rank}${s.tie ? ' (tie)' : ''}`,
      String(s.index),
      el('a', {href: `#/job/${encodeURIComponent(s.job_id)}`, class: 'mono'}, s.job_id),
      stateBadge(s.state),
      s.ok ? badge('correct', 'ok') : s.result ? badge(s.r.error_kind || 'not correct', 'bad') : '',
      s.speedup === null ? '' : `${num(s.speedup)}×`,
      s.ci ? `[${num(s.ci[0])}, ${num(s.ci[1])}]` : '',
      s.verdict || '']);
    replace(main, el('h1', {}, 'Batch ', el('span', {class: 'mono'}, batch.batch_id)),
      el('p', {}, `${batch.finished} of ${batch.total} finished · ${batch.state}`),
      table(['rank', 'candidate', 'job', 'state', 'verdict', 'speedup', '95 % interval', 'vs reference'],
            rows, 'batch'));
    return batch.state === 'finished';
  };
  if (await load()) return null;
  const timer = setInterval(() => load().then((done) => done && clearInterval(timer)).catch(() => {}),
                            REFRESH_MS);
  return () => clearInterval(timer);
}
