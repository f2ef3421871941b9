// Small inline SVG charts drawn from a result's statistics; no library. Labels are text nodes.
import {svg} from '/ui/dom.js';

const W = 640;
const ROW = 46;
const LEFT = 110;
const RIGHT = 20;

function fmt(ms) {
  if (typeof ms !== 'number' || !isFinite(ms)) return '';
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 1) return `${ms.toFixed(2)} ms`;
  return `${(ms * 1000).toPrecision(3)} µs`;
}

// One box per side: whiskers min..max, box p5..p95, a line at the median, a dot at the mean,
// and (GPU) a diamond at kernel_time, the device's summed kernel time, against the event time.
// `rows`: [{label, stats: runtime_stats, kernelTime?, cls}]. Null when no row was timed.
export function timingPlot(rows) {
  const timed = rows.filter((r) => r.stats && typeof r.stats.median === 'number');
  if (timed.length === 0) return null;
  let hi = 0;
  for (const r of timed) {
    hi = Math.max(hi, r.stats.max ?? 0, r.stats.percentile_99 ?? 0, r.stats.mean ?? 0, r.kernelTime ?? 0);
  }
  hi = hi > 0 ? hi * 1.05 : 1;
  // The axis starts near the fastest trial when every trial is far from 0 (so close
  // distributions stay apart), else at 0.
  const lowest = Math.min(...timed.map((r) => r.stats.min ?? r.stats.median));
  const floor = lowest > 0.3 * hi ? lowest * 0.95 : 0;
  const H = timed.length * ROW + 40;
  const x = (ms) => LEFT + (Math.max(0, ms - floor) / (hi - floor)) * (W - LEFT - RIGHT);
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'plot timing-plot',
                           role: 'img', 'aria-label': 'timing distribution, reference and candidate'});
  timed.forEach((r, i) => {
    const s = r.stats;
    const y = 20 + i * ROW + ROW / 2;
    const lo = s.min ?? s.percentile_5 ?? s.median;
    const top = s.max ?? s.percentile_99 ?? s.median;
    const p5 = s.percentile_5 ?? lo;
    const p95 = s.percentile_95 ?? top;
    root.append(
      svg('text', {x: 8, y: y + 4, class: 'label'}, r.label),
      svg('line', {x1: x(lo), x2: x(top), y1: y, y2: y, class: 'whisker'}),
      svg('rect', {x: x(p5), y: y - 12, width: Math.max(1, x(p95) - x(p5)), height: 24,
                   class: `box ${r.cls}`}),
      svg('line', {x1: x(s.median), x2: x(s.median), y1: y - 14, y2: y + 14, class: 'median'}),
      svg('circle', {cx: x(s.mean ?? s.median), cy: y, r: 3.5, class: 'mean'},
        svg('title', {}, `mean ${fmt(s.mean)}`)),
      svg('text', {x: x(s.median), y: y - 17, class: 'value', 'text-anchor': 'middle'},
        `median ${fmt(s.median)}`));
    if (typeof r.kernelTime === 'number') {
      const kx = x(r.kernelTime);
      root.append(svg('path', {d: `M${kx} ${y + 8} l5 6 l-5 6 l-5 -6 z`, class: 'kernel-time'},
        svg('title', {}, `kernel_time ${fmt(r.kernelTime)}`)));
    }
  });
  const axisY = H - 14;
  root.append(svg('line', {x1: LEFT, x2: W - RIGHT, y1: axisY - 8, y2: axisY - 8, class: 'axis'}));
  for (const f of [0, 0.25, 0.5, 0.75, 1]) {
    const v = floor + (hi - floor) * f;
    root.append(svg('text', {x: x(v), y: axisY + 4, class: 'tick', 'text-anchor': 'middle'}, fmt(v)));
  }
  return root;
}

// The speedup on a log scale with its 95 % interval and the line at 1 (no change).
export function speedupPlot(speedup, ci) {
  if (typeof speedup !== 'number' || !isFinite(speedup) || speedup <= 0) return null;
  const lo = Array.isArray(ci) && ci[0] > 0 ? ci[0] : speedup;
  const hi = Array.isArray(ci) && ci[1] > 0 ? ci[1] : speedup;
  const span = Math.max(2, hi * 1.3, 1 / Math.min(lo / 1.3, 0.5));
  const H = 64;
  const x = (v) => LEFT + ((Math.log(v) + Math.log(span)) / (2 * Math.log(span))) * (W - LEFT - RIGHT);
  const y = 28;
  return svg('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'plot speedup-plot',
                     role: 'img', 'aria-label': 'speedup and its interval'},
    svg('text', {x: 8, y: y + 4, class: 'label'}, 'speedup'),
    svg('line', {x1: x(1), x2: x(1), y1: 8, y2: H - 16, class: 'unity'}),
    svg('text', {x: x(1), y: H - 4, class: 'tick', 'text-anchor': 'middle'}, '1×'),
    svg('line', {x1: x(lo), x2: x(hi), y1: y, y2: y, class: 'interval'}),
    svg('line', {x1: x(lo), x2: x(lo), y1: y - 7, y2: y + 7, class: 'interval'}),
    svg('line', {x1: x(hi), x2: x(hi), y1: y - 7, y2: y + 7, class: 'interval'}),
    svg('circle', {cx: x(speedup), cy: y, r: 5, class: 'point'}),
    svg('text', {x: x(speedup), y: y - 10, class: 'value', 'text-anchor': 'middle'},
      `${speedup.toPrecision(3)}× [${lo.toPrecision(3)}, ${hi.toPrecision(3)}]`));
}

// Correctness per trial: one square per trial, passed or not, with its errors as a tooltip.
export function trialsPlot(perTrial) {
  if (!Array.isArray(perTrial) || perTrial.length === 0) return null;
  const size = 22;
  const root = svg('svg', {width: perTrial.length * (size + 4) + 4, height: size + 8,
                           class: 'plot trials-plot', role: 'img', 'aria-label': 'correctness per trial'});
  perTrial.forEach((t, i) => {
    root.append(svg('rect', {x: 4 + i * (size + 4), y: 4, width: size, height: size,
                             class: t.passed ? 'pass' : 'fail'},
      svg('title', {}, `trial ${t.trial}: ${t.passed ? 'passed' : 'failed'}; max abs error ` +
                       `${t.max_abs_error}, max rel error ${t.max_rel_error}, mismatches ` +
                       `${t.mismatch_count}${t.message ? '; ' + t.message : ''}`)));
  });
  return root;
}

// Horizontal bars in groups, each group on its own scale (a group is one input size, its bars
// the kernels timed at that size): `groups` [{label, bars: [{label, value, cls, note}]}].
// Null when nothing has a value.
export function barsPlot(groups, ariaLabel) {
  const shown = groups.map((g) => ({...g, bars: g.bars.filter((b) => typeof b.value === 'number' && b.value > 0)}))
    .filter((g) => g.bars.length > 0);
  if (shown.length === 0) return null;
  const BAR = 16;
  const GAP = 22;
  const H = shown.reduce((h, g) => h + GAP + g.bars.length * (BAR + 3), 10);
  const root = svg('svg', {viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: 'plot bars-plot',
                           role: 'img', 'aria-label': ariaLabel || 'bars'});
  let y = 6;
  for (const g of shown) {
    root.append(svg('text', {x: 8, y: y + 13, class: 'group-label'}, g.label));
    y += GAP;
    const hi = Math.max(...g.bars.map((b) => b.value));
    for (const b of g.bars) {
      const w = Math.max(1, (b.value / hi) * (W - LEFT - RIGHT - 120));
      root.append(
        svg('text', {x: 8, y: y + BAR - 4, class: 'label'}, b.label),
        svg('rect', {x: LEFT, y, width: w, height: BAR, class: `bar ${b.cls || ''}`},
          svg('title', {}, `${b.label}: ${fmt(b.value)}${b.note ? ' · ' + b.note : ''}`)),
        svg('text', {x: LEFT + w + 6, y: y + BAR - 4, class: 'value'}, `${fmt(b.value)}${b.note ? '  ' + b.note : ''}`));
      y += BAR + 3;
    }
  }
  return root;
}
