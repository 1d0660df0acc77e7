// The promptkit page: ask, watch, cancel, retry. The server owns every
// prompt's state (seed §1): this tab only shows it, so closing the tab
// cancels nothing and reopening shows what finished meanwhile.

import { api, getToken, setToken, onUnauthorized, withoutToken } from './api.js';
import { Live } from './live.js';

const $ = (id) => document.getElementById(id);
const body = document.body;
const thread = $('thread');
const textEl = $('compose-text');

const pollMs = Number(body.dataset.pollMs) || 2000;
const localMode = body.dataset.local === 'true';
if (localMode) withoutToken();

// Every prompt the page shows, by id: { id, prompt (stored fields, once
// read), sent (what this tab sent, until then), job (current), jobs (all,
// oldest first, once read), history (whether jobs is read and still
// current), answer, el }.
const prompts = new Map();
// The newest server time seen (page load, event, job update): polling
// starts a little before it, so no change is missed whatever the browser's
// clock says.
let newest = body.dataset.now;
// as_of of the last poll, while polling goes on without the stream.
let asOf = null;
// The prompt this tab continues: its own, so two tabs continuing two
// threads never mix them up; read once, when a prompt is sent.
let continuation = null;
let loaded = false;

const stateClass = { queued: 'is-queued', running: 'is-pending', failed: 'is-orphan', cancelled: 'is-cancelled' };
const stateLabel = {
  queued: 'Queued', running: 'Running', succeeded: 'Answered',
  failed: 'Failed', cancelled: 'Cancelled', superseded: 'Retried',
};
const inFlight = (job) => !!job && (job.state === 'queued' || job.state === 'running');

// streamURL is where the event stream opens, resuming after lastId. With
// a token, EventSource cannot send it: a single-use ticket stands in.
async function streamURL(lastId) {
  const q = new URLSearchParams();
  if (!localMode) q.set('ticket', (await api('POST', '/v1/events/ticket')).ticket);
  if (lastId !== null) q.set('last_event_id', lastId);
  const qs = q.toString();
  return '/v1/events' + (qs ? '?' + qs : '');
}

const live = new Live({
  pollMs,
  useStream: true,
  streamURL,
  ticketed: !localMode,
  onEvent,
  onOpen: () => { asOf = null; poll().catch(() => {}); },
  poll,
  busy: () => [...prompts.values()].some((p) => inFlight(p.job)),
  onMode: showMode,
});

// ---- Merging: every source (views, /v1/recent, events, our own calls)
// goes through applyJob, which keeps the newest state of each job.

const rank = (state) => (state === 'queued' ? 0 : state === 'running' ? 1 : 2);

// newer reports whether job a is a later state than job b. A retry's job
// is newer than the job it replaced (ids are UUIDv7: later ids sort
// after); within a job, a later update, then a later attempt, then a
// terminal state win — so an answer read before an event never moves a
// prompt back.
function newer(a, b) {
  if (!b) return true;
  if (a.id !== b.id) return a.id > b.id;
  const ta = Date.parse(a.updated_at) || 0;
  const tb = Date.parse(b.updated_at) || 0;
  if (ta !== tb) return ta > tb;
  if ((a.attempt || 0) !== (b.attempt || 0)) return (a.attempt || 0) > (b.attempt || 0);
  return rank(a.state) >= rank(b.state);
}

function seen(time) {
  if (time && (!newest || Date.parse(time) > Date.parse(newest))) newest = time;
}

function record(id) {
  let p = prompts.get(id);
  if (!p) {
    p = { id, prompt: null, sent: null, job: null, jobs: [], history: false, answer: null, el: null };
    prompts.set(id, p);
  }
  return p;
}

function applyJob(p, job) {
  if (!newer(job, p.job)) return false;
  const before = p.job ? p.job.state : null;
  p.job = p.job && p.job.id === job.id ? { ...p.job, ...job } : job;
  seen(job.updated_at);
  // Changes, not first sightings (a page of older prompts is no news).
  if (loaded && before && before !== p.job.state) announceState(p);
  return true;
}

// From GET /v1/prompts/{id}: a prompt, its current job, its answer and
// its history.
function applyView(v) {
  const p = record(v.prompt.id);
  p.prompt = v.prompt;
  p.jobs = v.jobs;
  p.history = true;
  applyJob(p, v.job);
  if (v.answer) p.answer = v.answer;
  render(p);
  nameParent(p);
}

// From the listing or /v1/recent: a prompt, its current job and its
// answer — all but its history, which readHistory reads when it is shown.
function applyState(s) {
  if (!s.prompt && !prompts.has(s.prompt_id)) return refresh(s.prompt_id);
  const p = record(s.prompt_id);
  if (s.prompt) p.prompt = s.prompt;
  const otherJob = p.job && p.job.id !== s.job.id;
  applyJob(p, s.job);
  if (s.answer) p.answer = s.answer;
  if (otherJob) p.history = false; // retried elsewhere: the history grew
  render(p);
  nameParent(p);
  readHistory(p);
}

// Follow-ups shown before their parent was read now name it.
function nameParent(p) {
  thread.querySelectorAll('.parent-link[href="#p-' + p.id + '"]').forEach((a) => {
    a.textContent = '“' + snippet(questionText(p)) + '”';
  });
}

const historyShown = () => $('history').checked;

// readHistory reads a prompt's earlier jobs (GET /v1/prompts/{id}) while
// *Show earlier attempts* is on, when it has some (its current job
// replaced another) the page has not read yet.
function readHistory(p) {
  if (historyShown() && !p.history && p.job && p.job.supersedes) refresh(p.id);
}

function onEvent(ev) {
  seen(ev.at);
  const p = prompts.get(ev.prompt_id);
  if (!p) return refresh(ev.prompt_id);
  const otherJob = p.job && p.job.id !== ev.job_id;
  const job = {
    id: ev.job_id, prompt_id: ev.prompt_id, state: ev.state, attempt: ev.attempt,
    error_kind: ev.error_kind, updated_at: ev.at,
  };
  if (!applyJob(p, job)) return;
  render(p);
  // Events carry the state, not the answer, the error message or the
  // history: read the prompt when one of those changed.
  if (otherJob || !inFlight(job)) refresh(p.id);
  live.wake();
}

// refresh reads one prompt (GET /v1/prompts/{id}); calls for a prompt
// already being read make one more read after it, never several at once.
const reading = new Map(); // id → whether to read again
async function refresh(id) {
  if (reading.has(id)) return void reading.set(id, true);
  reading.set(id, false);
  try {
    applyView(await api('GET', '/v1/prompts/' + encodeURIComponent(id)));
  } catch (e) {
    if (e.status === 404) forget(id); // archived, or not this caller's
  } finally {
    const again = reading.get(id);
    reading.delete(id);
    if (again) refresh(id);
    live.wake();
  }
}

function forget(id) {
  const p = prompts.get(id);
  if (p && p.el) p.el.remove();
  prompts.delete(id);
  $('empty').hidden = prompts.size > 0;
}

async function poll() {
  const since = asOf || new Date((Date.parse(newest) || Date.now()) - 5000).toISOString();
  const r = await api('GET', '/v1/recent?since=' + encodeURIComponent(since));
  asOf = r.as_of;
  seen(r.as_of);
  r.prompts.forEach(applyState);
}

// ---- Rendering: each prompt's element is built once and then updated
// in place, so focus, selection and the compose box are never disturbed.

const itemHTML = `
  <article>
    <p class="parent" hidden>Continues <a class="parent-link" href="#"></a></p>
    <p class="question"></p>
    <p class="status"><span class="state"></span><span class="error-kind"></span><span class="meta"></span></p>
    <p class="error-message" hidden></p>
    <p class="notice" role="alert"></p>
    <div class="controls">
      <button type="button" class="cancel">Cancel</button>
      <button type="button" class="retry chip">Retry</button>
    </div>
    <div class="answer markdown"></div>
    <div class="answer-actions" hidden>
      <button type="button" class="copy">Copy</button>
      <button type="button" class="continue">Continue from here</button>
    </div>
    <ol class="attempts" aria-label="Earlier attempts"></ol>
  </article>`;

function element(p) {
  if (p.el) return p.el;
  const li = document.createElement('li');
  li.className = 'prompt';
  li.id = 'p-' + p.id;
  li.dataset.promptId = p.id;
  li.tabIndex = -1; // focus lands here when its button goes away
  li.innerHTML = itemHTML; // static markup: data goes in through textContent
  const q = li.querySelector('.question');
  q.id = 'q-' + p.id;
  // Every button says which prompt it acts on.
  li.querySelectorAll('button').forEach((b) => b.setAttribute('aria-describedby', q.id));
  // Creation order: prompt ids are UUIDv7, whose text order is the order
  // in which the store created the prompts — so completion order, or the
  // order in which the page learns of them, never reorders the thread.
  const next = [...thread.children].find((c) => c.dataset.promptId > p.id);
  thread.insertBefore(li, next || null);
  p.el = li;
  $('empty').hidden = true;
  return li;
}

function questionText(p) {
  const s = p.prompt || p.sent || {};
  if (s.text) return s.text;
  if (s.prompt_ref) return s.prompt_ref + (s.inputs ? ' ' + JSON.stringify(s.inputs) : '');
  return '…';
}

function snippet(text, n = 60) {
  const t = text.replace(/\s+/g, ' ').trim();
  return t.length > n ? t.slice(0, n - 1) + '…' : t;
}

function render(p) {
  const li = element(p);
  const job = p.job || { state: 'queued' };
  const q = (sel) => li.querySelector(sel);
  const focused = li.contains(document.activeElement) ? document.activeElement : null;

  li.classList.remove(...Object.values(stateClass));
  if (stateClass[job.state]) li.classList.add(stateClass[job.state]);
  li.dataset.state = job.state;

  q('.question').textContent = questionText(p);
  const parentID = (p.prompt || p.sent || {}).parent_id;
  q('.parent').hidden = !parentID;
  if (parentID) {
    const parent = prompts.get(parentID);
    q('.parent-link').href = '#p-' + parentID;
    q('.parent-link').textContent = parent ? '“' + snippet(questionText(parent)) + '”' : 'an earlier prompt';
  }

  q('.state').textContent = stateLabel[job.state] || job.state;
  q('.error-kind').textContent = job.state === 'failed' && job.error_kind ? job.error_kind : '';
  const profile = (p.prompt || p.sent || {}).profile;
  const answered = job.state === 'succeeded' && p.answer && p.answer.job_id === job.id ? p.answer : null;
  const meta = [];
  if (profile) meta.push(profile);
  // The model says who answered: "promptkit-simulated" when serve runs
  // without a configured backend.
  if (answered && answered.model) meta.push(answered.model);
  // With a model group, which of the profile's backends answered.
  if (answered && answered.backend) meta.push('from ' + answered.backend);
  if (job.attempt > 1) meta.push('attempt ' + job.attempt + (job.max_attempts ? ' of ' + job.max_attempts : ''));
  if (job.state === 'queued' && job.error_kind) meta.push('retrying after ' + job.error_kind);
  q('.meta').textContent = meta.join(' · ');
  const msg = job.state === 'failed' ? job.error_message || '' : '';
  q('.error-message').textContent = msg;
  q('.error-message').hidden = !msg;

  q('.cancel').hidden = !inFlight(job);
  q('.retry').hidden = job.state !== 'failed';

  // The answer of the current job only: a retried prompt shows nothing
  // until its new job answers.
  const a = answered;
  const answer = q('.answer');
  if (a && answer.dataset.responseId !== a.id) {
    // The server rendered this HTML from Markdown and escaped every
    // piece of raw HTML in it (server/page.go): it holds no script, no
    // event handler and no link that is not http, https or mailto.
    answer.innerHTML = a.html;
    answer.dataset.responseId = a.id;
  } else if (!a && answer.dataset.responseId) {
    answer.replaceChildren();
    delete answer.dataset.responseId;
  }
  q('.answer-actions').hidden = !a;

  const attempts = q('.attempts');
  attempts.replaceChildren(...p.jobs.filter((j) => j.state === 'superseded').map((j) => {
    const item = document.createElement('li');
    item.className = 'attempt is-superseded';
    const how = j.error_kind ? 'failed: ' + j.error_kind : j.response_id ? 'answered' : 'stopped';
    item.textContent = 'Earlier attempt (' + how + '), replaced by a retry';
    return item;
  }));

  // A control that just went away (Cancel once cancelled, Retry once
  // retried) hands the focus to its prompt, not to the top of the page.
  if (focused && focused !== li && focused.closest('[hidden]')) li.focus();
}

function announceState(p) {
  const s = p.job.state;
  if (s === 'running' || s === 'superseded') return; // too chatty
  let label = stateLabel[s];
  if (s === 'failed' && p.job.error_kind) label += ' (' + p.job.error_kind + ')';
  announce(label + ': “' + snippet(questionText(p), 40) + '”');
}

function announce(msg) {
  const el = $('announcer');
  el.textContent = '';
  // A new text node in a cleared region is announced even when the text
  // repeats.
  requestAnimationFrame(() => { el.textContent = msg; });
}

function showMode(mode) {
  const el = $('connection');
  el.dataset.mode = mode;
  body.dataset.updates = mode;
  el.textContent = {
    connecting: 'Connecting…',
    live: 'Live',
    polling: 'Checking every ' + pollMs / 1000 + ' s',
    idle: 'Nothing running',
  }[mode];
}

// ---- Actions

function errorText(e) {
  if (e.status === 0) return 'The server cannot be reached; try again.';
  if (e.status === 401) return 'The server needs a token (above).';
  return e.message || 'Something went wrong (' + e.status + ').';
}

function composeError(msg) {
  $('compose-error').textContent = msg;
}

function newKey() {
  if (crypto.randomUUID) return crypto.randomUUID();
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

// draft is what is being sent and its Idempotency-Key: sending the same
// again after a lost answer cannot queue it twice.
let draft = null;
let sending = false;

async function send() {
  if (sending) return;
  const text = textEl.value;
  if (!text.trim()) return composeError('Write a prompt first.');
  const req = { text, priority: Number($('priority').value) };
  const profile = $('profile').value;
  if (profile) req.profile = profile;
  const parent = continuation;
  if (parent) req.parent_id = parent;
  const sig = JSON.stringify(req);
  if (!draft || draft.sig !== sig) draft = { sig, key: newKey() };

  sending = true;
  $('send').disabled = true;
  try {
    const r = await api('POST', '/v1/prompts', req, { 'Idempotency-Key': draft.key });
    draft = null;
    composeError('');
    // Clear only what was sent: text typed while the request was out stays.
    if (textEl.value === text) textEl.value = '';
    if (continuation === parent) setContinuation(null);
    const p = record(r.prompt_id);
    p.sent = { text, parent_id: parent, profile };
    applyJob(p, { id: r.job_id, prompt_id: r.prompt_id, state: r.state });
    render(p);
    p.el.scrollIntoView({ block: 'nearest' });
    announce('Sent: “' + snippet(text, 40) + '”');
    refresh(p.id); // its stored fields, and its state should no event come
  } catch (e) {
    composeError(errorText(e));
  } finally {
    sending = false;
    $('send').disabled = false;
    live.wake();
  }
}

async function cancel(p) {
  try {
    const r = await api('POST', '/v1/jobs/' + encodeURIComponent(p.job.id) + '/cancel');
    applyJob(p, r.job);
  } catch (e) {
    if (e.status === 409) refresh(p.id); // it finished meanwhile
    else notice(p, errorText(e));
  }
  render(p);
  live.wake();
}

async function retry(p) {
  try {
    const r = await api('POST', '/v1/prompts/' + encodeURIComponent(p.id) + '/retry', {});
    applyJob(p, { id: r.job_id, prompt_id: r.prompt_id, state: r.state });
    refresh(p.id); // the history, with the attempt this one replaced
  } catch (e) {
    if (e.status === 409) refresh(p.id);
    else notice(p, errorText(e));
  }
  render(p);
  live.wake();
}

function notice(p, msg) {
  const el = p.el.querySelector('.notice');
  el.textContent = msg;
}

async function copy(p, button) {
  const md = p.answer.output; // the Markdown as the model wrote it
  try {
    await navigator.clipboard.writeText(md);
  } catch {
    // No clipboard API (a page not on https or localhost): the old way.
    const ta = document.createElement('textarea');
    ta.value = md;
    ta.setAttribute('readonly', '');
    ta.className = 'offscreen';
    document.body.append(ta);
    ta.select();
    document.execCommand('copy');
    ta.remove();
    button.focus();
  }
  button.textContent = 'Copied';
  announce('Answer copied');
  setTimeout(() => { button.textContent = 'Copy'; }, 1500);
}

function setContinuation(id) {
  continuation = id;
  $('continuing').hidden = !id;
  if (!id) return;
  const link = $('continuing-link');
  link.href = '#p-' + id;
  link.textContent = '“' + snippet(questionText(prompts.get(id))) + '”';
  textEl.focus();
}

// ---- Loading

let olderCursor = '';

async function load(cursor) {
  const r = await api('GET', '/v1/prompts?limit=50' + (cursor ? '&cursor=' + encodeURIComponent(cursor) : ''));
  olderCursor = r.next_cursor || '';
  $('older').hidden = !olderCursor;
  // Each prompt comes with its text, current job and answer: nothing more
  // to read, but the history of retried ones while it is shown.
  r.prompts.forEach(applyState);
}

// loadProfiles fills the profile select from /v1/profiles. Its first
// option, "default", sends no profile (the server's default, named when
// the server says which); the others are the engine's profiles. Without
// an answer only "default" is offered.
async function loadProfiles() {
  const r = await api('GET', '/v1/profiles');
  const select = $('profile');
  const chosen = select.value;
  if (r.default && r.default !== 'default') select.options[0].textContent = 'default (' + r.default + ')';
  for (const id of r.profiles) {
    if (id === r.default || [...select.options].some((o) => o.value === id)) continue;
    select.append(new Option(id, id));
  }
  select.value = chosen;
}

function askForToken(message) {
  $('auth').hidden = false;
  if (message) $('auth-help').textContent = message;
}

async function boot() {
  $('empty').hidden = false;
  if (!localMode) askForToken();
  if (!localMode && !getToken()) {
    showMode('idle');
    $('token').focus();
    return;
  }
  live.start(); // before loading: nothing that changes meanwhile is missed
  loadProfiles().catch(() => {}); // the default still works without the list
  try {
    await load();
  } catch (e) {
    composeError(errorText(e));
  }
  loaded = true;
  thread.lastElementChild?.scrollIntoView({ block: 'nearest' });
  live.wake();
}

// ---- Wiring

$('compose').addEventListener('submit', (e) => {
  e.preventDefault();
  send();
});

textEl.addEventListener('keydown', (e) => {
  // Enter sends; Shift+Enter is a new line; an IME composition's Enter
  // is the IME's.
  if (e.key === 'Enter' && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey && !e.isComposing) {
    e.preventDefault();
    $('compose').requestSubmit();
  }
});

thread.addEventListener('click', (e) => {
  const button = e.target.closest('button');
  const li = e.target.closest('li.prompt');
  const p = li && prompts.get(li.dataset.promptId);
  if (!button || !p) return;
  if (button.classList.contains('cancel')) cancel(p);
  else if (button.classList.contains('retry')) retry(p);
  else if (button.classList.contains('copy')) copy(p, button);
  else if (button.classList.contains('continue')) setContinuation(p.id);
});

$('continuing-clear').addEventListener('click', () => {
  setContinuation(null);
  textEl.focus();
});

$('history').addEventListener('change', (e) => {
  body.classList.toggle('show-history', e.target.checked);
  if (e.target.checked) prompts.forEach(readHistory);
});

$('older').addEventListener('click', () => {
  load(olderCursor).catch((e) => composeError(errorText(e)));
});

$('auth-form').addEventListener('submit', (e) => {
  e.preventDefault();
  setToken($('token').value.trim());
  location.reload(); // start over with the token
});

$('token-forget').addEventListener('click', () => {
  setToken('');
  location.reload();
});

onUnauthorized(() => {
  live.stopStream();
  askForToken(!localMode && getToken()
    ? 'The server refused this token: it may have been revoked. Enter another.'
    : 'This server now needs a token. Create one with promptkit tokens create; it is kept in this browser only.');
});

boot();
