// Syntax highlighting of kernel sources (Python for torch/triton, C++ for cuda) into spans of
// text nodes: a token's class colours it, its text stays text. A small tokenizer, not a
// parser: comments, strings, numbers, keywords, decorators and preprocessor lines.
import {el} from '/ui/dom.js';

const PY_KEYWORDS = new Set(('False None True and as assert async await break class continue def del ' +
  'elif else except finally for from global if import in is lambda nonlocal not or pass raise ' +
  'return try while with yield').split(' '));
const C_KEYWORDS = new Set(('auto bool break case char const constexpr continue default do double ' +
  'else enum extern false float for if inline int long namespace return short signed sizeof ' +
  'static struct switch template true typedef typename union unsigned using void volatile while ' +
  '__global__ __device__ __host__ __shared__ __restrict__ __syncthreads').split(' '));
// Groups: 1 comment, 2 string, 3 decorator or preprocessor line, 4 number, 5 identifier.
const PY_TOKENS = /(#[^\n]*)|("""[\s\S]*?"""|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(@[\w.]+)|(\b\d[\w.]*)|([A-Za-z_]\w*)/g;
const C_TOKENS = /(\/\/[^\n]*|\/\*[\s\S]*?\*\/)|("(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')|(^[ \t]*#[^\n]*)|(\b\d[\w.]*)|([A-Za-z_]\w*)/gm;
const CLASSES = [null, 'tok-comment', 'tok-string', 'tok-meta', 'tok-number', 'tok-keyword'];
const MAX_HIGHLIGHTED = 200000;  // characters; longer sources are shown plain

export function highlighted(source, kernelType) {
  const text = source === undefined || source === null ? '' : String(source);
  const node = el('pre', {class: 'code source'});
  if (text.length > MAX_HIGHLIGHTED) {
    node.append(text);
    return node;
  }
  const c = kernelType === 'cuda';
  const tokens = new RegExp(c ? C_TOKENS : PY_TOKENS);
  const keywords = c ? C_KEYWORDS : PY_KEYWORDS;
  let at = 0;
  let plain = '';
  for (let m = tokens.exec(text); m !== null; m = tokens.exec(text)) {
    const group = m.findIndex((g, i) => i > 0 && g !== undefined);
    const isWord = group === 5;
    if (isWord && !keywords.has(m[0])) continue;  // an ordinary name stays in the plain run
    plain += text.slice(at, m.index);
    if (plain) node.append(plain);
    plain = '';
    node.append(el('span', {class: CLASSES[group]}, m[0]));
    at = m.index + m[0].length;
  }
  node.append(text.slice(at));
  return node;
}
