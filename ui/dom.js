// DOM helpers. Everything a page shows from the API may come from a kernel (sources, errors,
// names, logs) and is untrusted: it only ever becomes text nodes (textContent), never markup.
// No HTML parsing API is used anywhere in the UI; tests/integration/test_ui.py checks that.

const SVG_NS = 'http://www.w3.org/2000/svg';

// el('a', {href: '#/x', class: 'c'}, 'text', child, ...): an element with attributes and
// children; strings become text nodes, null/undefined/false are skipped.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  return fill(node, attrs, children);
}

// The same for SVG elements.
export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  return fill(node, attrs, children);
}

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else if (/^[a-zA-Z][a-zA-Z0-9-:]*$/.test(key) && !key.toLowerCase().startsWith('on')) {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces a node's children.
export function replace(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// A preformatted block of untrusted text.
export function pre(text, cls) {
  return el('pre', {class: cls || 'code'}, text === undefined || text === null ? '' : String(text));
}

// Unix epoch seconds as local date and time.
export function when(seconds) {
  if (typeof seconds !== 'number') return '';
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
         `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function duration(seconds) {
  if (typeof seconds !== 'number' || !isFinite(seconds)) return '';
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  return `${Math.round(seconds / 60)} min`;
}

export function num(x, digits = 3) {
  return typeof x === 'number' && isFinite(x) ? x.toPrecision(digits) : '—';
}

// A table: headers and rows of cells (strings or nodes).
export function table(headers, rows, cls) {
  return el('table', {class: cls || ''},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {}, h)))),
    el('tbody', {}, rows.map((cells) => el('tr', {}, cells.map((c) => el('td', {}, c))))));
}

// A definition list of [label, value] pairs; empty values are left out (null when all are).
export function facts(pairs) {
  const given = pairs.filter(([, v]) => v !== undefined && v !== null && v !== '');
  if (given.length === 0) return null;
  return el('dl', {class: 'facts'}, given.map(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
}

// Any JSON value as a nested, escaped tree (for the parts a page has no special view of).
export function jsonTree(value) {
  if (value === null || typeof value !== 'object') {
    return el('span', {class: 'json-' + (value === null ? 'null' : typeof value)}, JSON.stringify(value));
  }
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
  if (entries.length === 0) return el('span', {}, Array.isArray(value) ? '[]' : '{}');
  return el('ul', {class: 'json'}, entries.map(([k, v]) =>
    el('li', {}, el('span', {class: 'json-key'}, String(k)), ': ', jsonTree(v))));
}

export function badge(text, kind) {
  return el('span', {class: `badge ${kind || ''}`}, text);
}

export function stateBadge(state) {
  const kind = {success: 'ok', failed: 'bad', cancelled: 'warn', running: 'live', queued: 'muted'}[state];
  return badge(state || '?', kind);
}
