// The web UI in a real browser: Debian's chromium (/usr/bin/chromium, never a downloaded one)
// driven by playwright-core, against a running kforge with real finished jobs. Started by
// tests/integration/test_ui.py, which passes (environment):
//   KFORGE_UI_URL      http://127.0.0.1:<port>
//   KFORGE_UI_TOKEN    the API token the server asks for
//   KFORGE_UI_JOBS     JSON {correct, compare, hostile, cancelled, broken, live_body, batch,
//                      batch_jobs, session, report}: job ids (hostile: markup in its source and
//                      compile error; cancelled: in its error), the body of a slow job to
//                      submit for the live update, a batch id, a workbench session id (v1 with
//                      markup in its source and log) and a kept bench report id
//   KFORGE_UI_SHOTS    directory for the screenshots
// Prints one line per check ("ok <name>" or "FAIL <name>: <why>") and exits 1 if any failed.
import {chromium} from 'playwright-core';
import fs from 'node:fs';
import path from 'node:path';

const url = process.env.KFORGE_UI_URL;
const token = process.env.KFORGE_UI_TOKEN;
const jobs = JSON.parse(process.env.KFORGE_UI_JOBS);
const shots = process.env.KFORGE_UI_SHOTS;
fs.mkdirSync(shots, {recursive: true});

const failures = [];
const T = 30000;

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

async function check(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failures.push(name);
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

const browser = await chromium.launch({
  executablePath: process.env.KFORGE_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});

// A page that records every dialog, page error and console error, with the token given.
async function openPage({withToken = true} = {}) {
  const context = await browser.newContext({viewport: {width: 1280, height: 900}, acceptDownloads: true});
  const page = await context.newPage();
  page.events = {dialogs: [], errors: [], console: []};
  page.on('dialog', async (d) => { page.events.dialogs.push(d.message()); await d.dismiss(); });
  page.on('pageerror', (e) => page.events.errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') page.events.console.push(m.text()); });
  if (withToken) {
    await context.addInitScript((t) => sessionStorage.setItem('kforge.token', t), token);
  }
  return page;
}

// A screenshot of the viewport, or with `height` of the page's top that tall.
async function shot(page, name, height = 0) {
  const clip = height ? {x: 0, y: 0, width: 1280, height} : undefined;
  await page.screenshot({path: path.join(shots, `${name}.png`), fullPage: Boolean(height), clip});
}

await check('token prompt: nothing is readable without the token', async () => {
  const page = await openPage({withToken: false});
  await page.goto(`${url}/ui`);
  await page.locator('#token-form').waitFor({state: 'visible', timeout: T});
  assert(await page.locator('table.jobs').count() === 0, 'a jobs table without a token');
  const status = await page.evaluate(async () => (await fetch('/jobs')).status);
  assert(status === 401, `GET /jobs without a token answered ${status}`);
  await shot(page, 'token-prompt');
  await page.fill('#token-input', 'not-the-token');
  await page.click('#token-form button[type=submit]');
  await page.locator('#token-error').waitFor({state: 'visible', timeout: T});
  assert(await page.locator('table.jobs').count() === 0, 'a wrong token showed jobs');
  await page.fill('#token-input', token);
  await page.click('#token-form button[type=submit]');
  await page.locator('table.jobs tbody tr').first().waitFor({timeout: T});
  await page.context().close();
});

await check('jobs list: newest first, filters, pagination', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui`);
  const rows = page.locator('table.jobs tbody tr');
  await rows.first().waitFor({timeout: T});
  const ids = await page.locator('table.jobs a.job-link').allTextContents();
  for (const id of [jobs.correct, jobs.compare, jobs.hostile, jobs.broken]) {
    assert(ids.includes(id), `job ${id} not listed: ${ids}`);
  }
  await shot(page, 'jobs');
  // Export: the listed jobs as JSON Lines, downloaded with the token.
  const [download] = await Promise.all([page.waitForEvent('download', {timeout: T}), page.click('#export-jsonl')]);
  const exported = fs.readFileSync(await download.path(), 'utf8').trim().split('\n').map((l) => JSON.parse(l).job_id);
  assert(exported.join() === ids.join(), `exported ${exported} but listed ${ids}`);
  // Filter: triton jobs only (the broken one).
  await page.selectOption('#job-filters select[name=kernel_type]', 'triton');
  await page.click('#job-filters button[type=submit]');
  await page.waitForFunction(() => location.hash.includes('kernel_type=triton'));
  await page.waitForFunction((id) => {
    const links = [...document.querySelectorAll('table.jobs a.job-link')].map((a) => a.textContent);
    return links.length === 1 && links[0] === id;
  }, jobs.broken, {timeout: T});
  // Pagination: two a page, Older then Newest.
  await page.goto(`${url}/ui#/jobs?limit=2`);
  await page.waitForFunction(() => document.querySelectorAll('table.jobs tbody tr').length === 2, null, {timeout: T});
  const first = await page.locator('table.jobs a.job-link').allTextContents();
  await page.click('#older');
  await page.waitForFunction((prev) => {
    const now = [...document.querySelectorAll('table.jobs a.job-link')].map((a) => a.textContent);
    return now.length > 0 && !now.some((id) => prev.includes(id));
  }, first, {timeout: T});
  await page.click('#newest');
  await page.waitForFunction((prev) => {
    const now = [...document.querySelectorAll('table.jobs a.job-link')].map((a) => a.textContent);
    return now.join() === prev.join();
  }, first, {timeout: T});
  assert(page.events.errors.length === 0, `page errors: ${page.events.errors}`);
  await page.context().close();
});

await check('live update: a new job appears and finishes without a reload (stream, then polling)', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui`);
  await page.locator('table.jobs tbody tr').first().waitFor({timeout: T});
  const id = await page.evaluate(async ({body, t}) => {
    const r = await fetch('/evaluate?wait=false', {method: 'POST', body: JSON.stringify(body),
      headers: {'Content-Type': 'application/json', Authorization: `Bearer ${t}`}});
    return (await r.json()).job_id;
  }, {body: jobs.live_body, t: token});
  assert(id, 'the live job was not accepted');
  const row = page.locator('table.jobs tr', {has: page.locator(`a.job-link:text-is("${id}")`)});
  await row.waitFor({timeout: T});
  // Pushed by GET /jobs/events, not polled: the page says which.
  await page.waitForFunction(() => document.querySelector('.view')?.dataset.live === 'stream', null, {timeout: T});
  await row.locator('.badge:text-is("success")').waitFor({timeout: 120000});
  // A job page follows its own stream (GET /job/{id}/events) until the job ends.
  const slow = await page.evaluate(async ({body, t}) => {
    const r = await fetch('/evaluate?wait=false', {method: 'POST', body: JSON.stringify(body),
      headers: {'Content-Type': 'application/json', Authorization: `Bearer ${t}`}});
    return (await r.json()).job_id;
  }, {body: jobs.live_body, t: token});
  await page.goto(`${url}/ui#/job/${slow}`);
  await page.waitForFunction((id) => document.getElementById('job-id')?.textContent === id, slow, {timeout: T});
  await page.locator('p.verdict .badge:text-is("correct")').waitFor({timeout: 120000});
  assert(page.events.errors.length === 0, `page errors: ${page.events.errors}`);
  await page.context().close();
  // Without the stream (a proxy that drops it, say) the list falls back to polling.
  const polling = await openPage();
  await polling.route('**/jobs/events', (r) => r.abort());
  await polling.goto(`${url}/ui`);
  await polling.waitForFunction(() => document.querySelector('.view')?.dataset.live === 'polling', null, {timeout: T});
  const late = await polling.evaluate(async ({body, t}) => {
    const r = await fetch('/evaluate?wait=false', {method: 'POST', body: JSON.stringify(body),
      headers: {'Content-Type': 'application/json', Authorization: `Bearer ${t}`}});
    return (await r.json()).job_id;
  }, {body: jobs.live_body, t: token});
  const lateRow = polling.locator('table.jobs tr', {has: polling.locator(`a.job-link:text-is("${late}")`)});
  await lateRow.locator('.badge:text-is("success")').waitFor({timeout: 120000});
  await polling.context().close();
});

await check('job page: verdict, plots, sources; then a source diff', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui`);
  await page.click(`a.job-link:text-is("${jobs.compare}")`);
  await page.waitForFunction((id) => document.getElementById('job-id')?.textContent === id, jobs.compare, {timeout: T});
  const verdict = await page.locator('p.verdict').textContent();
  assert(verdict.includes('correct'), `verdict: ${verdict}`);
  const boxes = await page.locator('svg.timing-plot rect.box').count();
  assert(boxes === 2, `timing plot has ${boxes} boxes (reference and candidate expected)`);
  const trials = await page.locator('svg.trials-plot rect.pass').count();
  assert(trials >= 1, 'no passed trial drawn');
  const sources = await page.locator('pre.source').count();
  assert(sources === 2, `${sources} sources shown (reference and candidate expected)`);
  const keywords = await page.locator('pre.source span.tok-keyword').allTextContents();
  assert(keywords.includes('def') && keywords.includes('return'), `highlighted keywords: ${keywords}`);
  await shot(page, 'job', 1450);
  await page.fill('#diff-with input[name=other]', jobs.correct);
  await page.click('#diff-with button[type=submit]');
  await page.locator('pre.diff').waitFor({timeout: T});
  const added = await page.locator('pre.diff span.add').count();
  const removed = await page.locator('pre.diff span.del').count();
  assert(added > 0 && removed > 0, `diff: ${added} added, ${removed} removed lines`);
  await shot(page, 'diff');
  assert(page.events.errors.length === 0, `page errors: ${page.events.errors}`);
  await page.context().close();
});

await check('hostile jobs: their HTML shows as text and nothing runs', async () => {
  const page = await openPage();
  const shows = async (needles) => {
    const text = await page.locator('main').textContent();
    for (const needle of needles) assert(text.includes(needle), `the page does not show ${needle} literally`);
  };
  await page.goto(`${url}/ui#/job/${jobs.cancelled}`);
  await page.waitForFunction((id) => document.getElementById('job-id')?.textContent === id, jobs.cancelled, {timeout: T});
  await shows(['<svg onload=window.__pwned=3>']);
  await page.goto(`${url}/ui#/jobs`);  // the list shows the cancelled job's error too
  await page.locator(`a.job-link:text-is("${jobs.cancelled}")`).waitFor({timeout: T});
  await shows(['<svg onload=window.__pwned=3>']);
  await page.goto(`${url}/ui#/job/${jobs.hostile}`);
  await page.waitForFunction((id) => document.getElementById('job-id')?.textContent === id, jobs.hostile, {timeout: T});
  await page.locator('pre.source').first().waitFor({timeout: T});
  await shows(['<script>window.__pwned=1</script>', '<img src=x onerror="window.__pwned=2">']);
  const comment = await page.locator('pre.source span.tok-comment').first().textContent();
  assert(comment === '# <script>window.__pwned=1</script>', `the highlighted comment: ${comment}`);
  await page.waitForTimeout(500);
  const pwned = await page.evaluate(() => window.__pwned);
  assert(pwned === undefined, `window.__pwned is ${pwned}`);
  const injected = await page.evaluate(() => document.querySelectorAll('main img, main script, main svg[onload], main iframe').length);
  assert(injected === 0, `${injected} injected elements in the page`);
  assert(page.events.dialogs.length === 0, `dialogs: ${page.events.dialogs}`);
  await shot(page, 'hostile');
  await page.context().close();
});

await check('devices page', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui#/devices`);
  await page.locator('section.device h2').first().waitFor({timeout: T});
  const names = await page.locator('section.device h2').allTextContents();
  assert(names.length >= 1, 'no device');
  await shot(page, 'devices');
  await page.context().close();
});

await check('batch page: candidates ranked, each linking to its job', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui#/batch/${jobs.batch}`);
  const rows = page.locator('table.batch tbody tr');
  await page.waitForFunction(() => document.querySelectorAll('table.batch tbody tr').length === 2, null, {timeout: T});
  const first = await rows.nth(0).locator('td').allTextContents();
  const second = await rows.nth(1).locator('td').allTextContents();
  assert(first[0] === '1' && first[1] === '0' && first[4] === 'correct', `first row: ${first}`);
  assert(second[0] === '—' && second[1] === '1' && second[4] !== 'correct', `second row: ${second}`);
  await shot(page, 'batch');
  await rows.nth(0).locator('a').click();
  await page.waitForFunction((id) => document.getElementById('job-id')?.textContent === id,
                             jobs.batch_jobs[0], {timeout: T});
  await page.context().close();
});

await check('workbench sessions: list, versions with results, a diff, the log as text', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui#/sessions`);
  await page.locator(`a.session-link:text-is("${jobs.session}")`).waitFor({timeout: T});
  await shot(page, 'sessions');
  await page.click(`a.session-link:text-is("${jobs.session}")`);
  await page.waitForFunction((id) => document.getElementById('session-id')?.textContent === id, jobs.session, {timeout: T});
  const rows = await page.locator('table.versions tbody tr').allTextContents();
  assert(rows.length === 2, `versions: ${rows}`);
  assert(rows[0].includes('incorrect') && rows[1].includes('correct') && rows[1].includes('best'), `versions: ${rows}`);
  const cases = await page.locator('#version-2 table.cases tbody tr').count();
  assert(cases >= 1, 'no benchmark case of v2');
  // The log is Markdown drawn as elements: its headings and its versions table.
  const headings = await page.locator('#session-log .markdown h3').allTextContents();
  assert(headings.includes('Versions'), `log headings: ${headings}`);
  assert(await page.locator('#session-log .markdown table.md').count() >= 1, 'no table in the log');
  await shot(page, 'session', 1400);
  // The diff between the two versions (v1 -> v2 is shown at once).
  const added = await page.locator('#version-diff-out pre.diff span.add').count();
  const removed = await page.locator('#version-diff-out pre.diff span.del').count();
  assert(added > 0 && removed > 0, `version diff: ${added} added, ${removed} removed`);
  await page.locator('#version-diff-out').scrollIntoViewIfNeeded();
  await shot(page, 'session-diff');
  // Hostile text: v1's source and the log's line about it show their markup as text.
  const log = await page.locator('#session-log').textContent();
  assert(log.includes('<script>window.__pwned=4</script>'), 'the log does not show the markup literally');
  await page.click('#version-1 > summary');
  const source = await page.locator('#version-1 pre.source').textContent();
  assert(source.includes('<img src=x onerror="window.__pwned=5">'), 'v1 source does not show the markup');
  await page.waitForTimeout(500);
  const pwned = await page.evaluate(() => window.__pwned);
  assert(pwned === undefined, `window.__pwned is ${pwned}`);
  const injected = await page.evaluate(() => document.querySelectorAll('main img, main script, main iframe').length);
  assert(injected === 0, `${injected} injected elements in the page`);
  // The renderer itself: markup stays text, and only http(s) and in-page links become anchors.
  const drawn = await page.evaluate(async () => {
    const {markdown} = await import('/ui/markdown.js');
    const node = markdown('# <b>t</b>\n\n| <i>c</i> |\n|---|\n| `<img src=x onerror=alert(1)>` |\n\n' +
      '> <script>x</script>\n\n[bad](javascript:alert(1)) [good](https://example.org) **<u>u</u>**');
    return {elements: [...node.querySelectorAll('*')].map((e) => e.tagName.toLowerCase()).sort().join(),
            links: [...node.querySelectorAll('a')].map((a) => a.getAttribute('href')), text: node.textContent};
  });
  assert(drawn.elements === 'a,blockquote,code,h2,p,strong,table,tbody,td,th,thead,tr,tr', `elements: ${drawn.elements}`);
  assert(drawn.links.join() === 'https://example.org', `links: ${drawn.links}`);
  for (const t of ['<b>t</b>', '<i>c</i>', '<img src=x onerror=alert(1)>', '<script>x</script>', 'javascript:alert(1)', '<u>u</u>']) {
    assert(drawn.text.includes(t), `the markdown does not show ${t} as text`);
  }
  assert(page.events.dialogs.length === 0 && page.events.errors.length === 0,
         `dialogs ${page.events.dialogs}, errors ${page.events.errors}`);
  await page.context().close();
});

await check('bench reports: the kept report with its per-op chart and table', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui#/bench`);
  await page.locator(`a.report-link:text-is("${jobs.report}")`).waitFor({timeout: T});
  await shot(page, 'bench-reports');
  await page.click(`a.report-link:text-is("${jobs.report}")`);
  await page.waitForFunction((id) => document.getElementById('report-id')?.textContent === id, jobs.report, {timeout: T});
  const bars = await page.locator('section.bench-op svg.bars-plot rect.bar').count();
  assert(bars >= 5, `${bars} bars (torch and four versions expected)`);
  const kernels = await page.locator('table.bench-rows tbody tr td:first-child').allTextContents();
  for (const k of ['torch', 'v1_baseline', 'v4_optimized']) {
    assert(kernels.some((t) => t.startsWith(k)), `kernel ${k} not in the table: ${kernels}`);
  }
  assert(await page.locator('table.bench-rows .badge:text-is("best")').count() === 1, 'no best kernel marked');
  assert(await page.locator('#bench-summary .markdown table').count() >= 1, 'no summary table');
  await page.click('details.bench-log > summary');
  const phases = await page.locator('details.bench-log .markdown h3').allTextContents();
  assert(phases.some((h) => h.startsWith('Phase 1')), `the op log's headings: ${phases}`);
  await shot(page, 'bench-report', 1200);
  assert(page.events.errors.length === 0, `page errors: ${page.events.errors}`);
  await page.context().close();
});

await check('devices: the /metrics highlights', async () => {
  const page = await openPage();
  await page.goto(`${url}/ui#/devices`);
  await page.locator('#metrics-highlights table.metrics tbody tr').waitFor({timeout: T});
  const cells = await page.locator('#metrics-highlights table.metrics tbody td').allTextContents();
  assert(Number(cells[0]) > 0 && Number(cells[1]) > 0, `submitted/finished: ${cells}`);
  const devices = await page.locator('#metrics-highlights table.metrics-devices tbody tr').count();
  assert(devices >= 1, 'no device in the metrics');
  await page.locator('#metrics-highlights').scrollIntoViewIfNeeded();
  await shot(page, 'devices-metrics');
  await page.context().close();
});

await browser.close();
process.exit(failures.length ? 1 : 0);
