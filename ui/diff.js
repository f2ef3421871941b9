// A line diff of two jobs' candidate sources (#/diff?a=<id>&b=<id>), and the diff itself
// (longest common subsequence of lines), shown as escaped text.
import * as api from '/ui/api.js';
import {el, replace} from '/ui/dom.js';

// The source a job was judged on: the candidate's (a compare's custom_kernel, an evaluate's kernel).
export function candidateSource(job) {
  const r = job.request || {};
  return ((r.custom_kernel || r.kernel || {}).source_code) ?? '';
}

// [{op: ' '|'-'|'+', text}] turning `a` into `b`. Quadratic in lines; sources are small, and
// longer pairs (over 4 million line pairs) fall back to whole-text replacement.
export function lineDiff(a, b) {
  const x = a.split('\n');
  const y = b.split('\n');
  if (x.length * y.length > 4e6) {
    return [...x.map((text) => ({op: '-', text})), ...y.map((text) => ({op: '+', text}))];
  }
  const n = x.length;
  const m = y.length;
  const lcs = Array.from({length: n + 1}, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({op: ' ', text: x[i]});
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) {
      out.push({op: '-', text: x[i++]});
    } else {
      out.push({op: '+', text: y[j++]});
    }
  }
  while (i < n) out.push({op: '-', text: x[i++]});
  while (j < m) out.push({op: '+', text: y[j++]});
  return out;
}

export function diffView(a, b) {
  const lines = lineDiff(a, b);
  const cls = {' ': 'same', '-': 'del', '+': 'add'};
  return el('pre', {class: 'code diff'},
    lines.map((l) => el('span', {class: cls[l.op]}, `${l.op} ${l.text}\n`)));
}

export async function diffPage(main, _arg, params) {
  const a = params.get('a') || '';
  const b = params.get('b') || '';
  const form = el('form', {class: 'filters', id: 'diff-form'},
    el('label', {}, 'Job A ', el('input', {name: 'a', value: a, size: 34, required: true})),
    el('label', {}, 'Job B ', el('input', {name: 'b', value: b, size: 34, required: true})),
    el('button', {type: 'submit'}, 'Compare sources'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const q = new URLSearchParams({a: form.elements.a.value.trim(), b: form.elements.b.value.trim()});
    location.hash = `#/diff?${q}`;
  });
  const out = el('div', {id: 'diff-out'});
  replace(main, el('h1', {}, 'Source diff'), form, out);
  if (!a || !b) {
    replace(out, el('p', {class: 'muted'}, 'Two job ids: the candidates\' sources, A to B.'));
    return null;
  }
  const [ja, jb] = await Promise.all([
    api.getJson(`/job/${encodeURIComponent(a)}`, {include: 'request'}),
    api.getJson(`/job/${encodeURIComponent(b)}`, {include: 'request'})]);
  replace(out,
    el('p', {}, el('a', {href: `#/job/${encodeURIComponent(a)}`}, a), ' → ',
      el('a', {href: `#/job/${encodeURIComponent(b)}`}, b)),
    diffView(candidateSource(ja), candidateSource(jb)));
  return null;
}
