// A small Markdown subset drawn as DOM nodes, for the workbench's development logs and the
// bench's summaries. The text is untrusted (it quotes kernel sources and errors): nothing is
// ever parsed as HTML; every piece becomes a text node inside an element made here. Links
// become anchors only for http(s) and in-page addresses; anything else stays text.
//
// Blocks: # headings (1-6), paragraphs, - / * / 1. lists, ``` fenced code, | tables |, > quotes,
// ---.
// Inline: `code`, **bold**, *emphasis* / _emphasis_, [text](address).
import {el} from '/ui/dom.js';

const INLINE = /(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)|\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*|\b_([^_\s][^_]*)_\b|\[([^\]]+)\]\(([^)\s]+)\)/g;

function safeHref(address) {
  return /^(https?:\/\/|#)/i.test(address) ? address : null;
}

export function inline(text) {
  const out = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) out.push(text.slice(last, m.index));
    if (m[1]) out.push(el('code', {}, m[2]));
    else if (m[3]) out.push(el('strong', {}, inline(m[3])));
    else if (m[4]) out.push(el('em', {}, inline(m[4])));
    else if (m[5]) out.push(el('em', {}, inline(m[5])));
    else {
      const href = safeHref(m[7]);
      out.push(href ? el('a', {href, rel: 'noopener noreferrer', target: href.startsWith('#') ? null : '_blank'},
        m[6]) : `${m[6]} (${m[7]})`);
    }
    last = m.index + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

function cells(line) {
  return line.trim().replace(/^\|/, '').replace(/\|$/, '').split('|').map((c) => c.trim());
}

// The Markdown `text` as a <div class="markdown"> of elements and text nodes.
export function markdown(text) {
  const lines = String(text ?? '').replace(/\r\n?/g, '\n').split('\n');
  const root = el('div', {class: 'markdown'});
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (/^```/.test(line)) {
      const code = [];
      for (i++; i < lines.length && !/^```/.test(lines[i]); i++) code.push(lines[i]);
      i++;
      root.append(el('pre', {class: 'code'}, code.join('\n')));
    } else if (/^#{1,6}\s/.test(line)) {
      const level = line.match(/^#+/)[0].length;
      root.append(el(`h${Math.min(6, level + 1)}`, {}, inline(line.slice(level).trim())));
      i++;
    } else if (/^\s*\|.*\|\s*$/.test(line)) {
      const rows = [];
      for (; i < lines.length && /^\s*\|.*\|\s*$/.test(lines[i]); i++) rows.push(cells(lines[i]));
      const separator = rows.length > 1 && rows[1].every((c) => /^:?-+:?$/.test(c));
      const head = separator ? rows[0] : null;
      const body = separator ? rows.slice(2) : rows;
      root.append(el('table', {class: 'md'},
        head ? el('thead', {}, el('tr', {}, head.map((c) => el('th', {}, inline(c))))) : null,
        el('tbody', {}, body.map((r) => el('tr', {}, r.map((c) => el('td', {}, inline(c))))))));
    } else if (/^\s*([-*]|\d+\.)\s+/.test(line)) {
      const ordered = /^\s*\d+\./.test(line);
      const list = el(ordered ? 'ol' : 'ul', {});
      for (; i < lines.length && /^\s*([-*]|\d+\.)\s+/.test(lines[i]); i++) {
        list.append(el('li', {}, inline(lines[i].replace(/^\s*([-*]|\d+\.)\s+/, ''))));
      }
      root.append(list);
    } else if (/^>\s?/.test(line)) {
      const quoted = [];
      for (; i < lines.length && /^>\s?/.test(lines[i]); i++) quoted.push(lines[i].replace(/^>\s?/, ''));
      root.append(el('blockquote', {}, inline(quoted.join(' '))));
    } else if (/^\s*(-{3,}|\*{3,})\s*$/.test(line)) {
      root.append(el('hr', {}));
      i++;
    } else if (line.trim() === '') {
      i++;
    } else {
      const para = [];
      for (; i < lines.length && lines[i].trim() !== '' &&
             !/^(```|#{1,6}\s|\s*\||>|\s*([-*]|\d+\.)\s+)/.test(lines[i]); i++) para.push(lines[i]);
      if (para.length === 0) para.push(lines[i++]);  // a line no block rule took
      root.append(el('p', {}, inline(para.join(' '))));
    }
  }
  return root;
}
