// The single-page app: a hash router (#/jobs, #/job/<id>, #/devices, #/diff, #/batch/<id>,
// #/sessions, #/session/<id>, #/bench, #/bench/<report id>) over the REST API, and the token
// prompt. Each page is a function that renders into <main>
// and may return a stop function (its live updates end when the page is left).
import * as api from '/ui/api.js';
import {el, replace} from '/ui/dom.js';
import {jobsPage} from '/ui/jobs.js';
import {jobPage} from '/ui/job.js';
import {devicesPage} from '/ui/devices.js';
import {diffPage} from '/ui/diff.js';
import {batchPage} from '/ui/batch.js';
import {sessionsPage, sessionPage} from '/ui/sessions.js';
import {benchPage} from '/ui/bench.js';

const main = document.getElementById('main');
const tokenForm = document.getElementById('token-form');
const tokenInput = document.getElementById('token-input');
const tokenError = document.getElementById('token-error');
const forget = document.getElementById('forget-token');

let stopPage = null;

// "#/job/abc?x=1" -> {name: 'job', arg: 'abc', params: URLSearchParams}
function route() {
  const hash = location.hash.replace(/^#\/?/, '');
  const [path, query] = hash.split('?');
  const [name, ...rest] = path.split('/');
  return {name: name || 'jobs', arg: rest.map(decodeURIComponent).join('/'),
          params: new URLSearchParams(query || '')};
}

const pages = {jobs: jobsPage, job: jobPage, devices: devicesPage, diff: diffPage, batch: batchPage,
               sessions: sessionsPage, session: sessionPage, bench: benchPage};
// The nav entry a page belongs to.
const navOf = {job: 'jobs', session: 'sessions'};

// Each render draws into a fresh view: a page still loading when the user moves on writes
// into its own detached view, and its live updates are stopped as soon as it returns.
let generation = 0;

async function render() {
  if (stopPage) stopPage();
  stopPage = null;
  const mine = ++generation;
  const r = route();
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', a.dataset.page === (navOf[r.name] || r.name));
  }
  const page = pages[r.name];
  const view = el('div', {class: 'view'});
  replace(main, view);
  if (!page) {
    replace(view, el('p', {class: 'error'}, 'No such page: ', r.name));
    return;
  }
  replace(view, el('p', {class: 'muted'}, 'Loading…'));
  try {
    const stop = (await page(view, r.arg, r.params)) || null;
    if (mine === generation) stopPage = stop;
    else if (stop) stop();
  } catch (e) {
    showError(view, e);
  }
}

function showError(view, e) {
  if (e instanceof api.ApiError && e.status === 401) return;  // the token form is up
  replace(view, el('p', {class: 'error', role: 'alert'}, String(e && e.message ? e.message : e)));
}

function askForToken() {
  if (stopPage) stopPage();
  stopPage = null;
  ++generation;
  replace(main);
  tokenForm.hidden = false;
  tokenError.hidden = !api.token();
  replace(tokenError, api.token() ? 'That token was refused.' : '');
  tokenInput.focus();
}

api.whenUnauthorized(askForToken);

tokenForm.addEventListener('submit', (event) => {
  event.preventDefault();
  api.setToken(tokenInput.value.trim());
  tokenInput.value = '';
  tokenForm.hidden = true;
  forget.hidden = false;
  render();
});

forget.addEventListener('click', () => {
  api.setToken('');
  forget.hidden = true;
  askForToken();
});

forget.hidden = !api.token();
window.addEventListener('hashchange', render);
render();
