// The promptkit page: ask, watch, cancel, retry. The server owns every
// prompt's state (seed §1): this tab only shows it, so closing the tab
// cancels nothing and reopening shows what finished meanwhile.

import { api, getToken, setToken, onUnauthorized, withoutToken } from './api.js';
import { Live } from './live.js';

const $ = (id) => document.getElementById(id);
const body = document.body;
const thread = $('thread');
const textEl = $('compose-text');

// The polling intervals are the server's (data-poll-ms, data-idle-poll-ms);
// ?poll_ms= and ?idle_poll_ms= shorten them for tests (never below 100 ms).
const query = new URLSearchParams(location.search);
const interval = (name, attr, dflt) => Math.max(100, Number(query.get(name)) || Number(body.dataset[attr]) || dflt);
const pollMs = interval('poll_ms', 'pollMs', 2000);
const idleMs = interval('idle_poll_ms', 'idlePollMs', 20000);
// skew turns this browser's clock into the server's (its time when it
// served the page), so "running 12 s" holds whatever the browser's clock
// says.
const skew = (Date.parse(body.dataset.now) - Date.now()) || 0;
const serverNow = () => Date.now() + skew;
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
// threads never mix them up. Once a prompt is sent in the thread, the
// next continues from that one, until the user leaves the thread; kept in
// sessionStorage, so it outlives a reload but stays this tab's.
let continuation = null;
const continuationKey = 'promptkit.continuation';
let loaded = false;
// Profile labels by id (GET /v1/profiles), and the default profile's id.
const profileLabels = new Map();
let defaultProfile = '';
// Threads the user collapsed, by root key.
const collapsed = new Set();

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
  idleMs,
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
  // What the event implies of the times the card shows, until the job is
  // read again; an error's words are the server's, for its kind only.
  if (otherJob || !p.job) job.created_at = ev.at;
  if (ev.state === 'running') job.started_at = ev.at;
  if (!inFlight(job)) job.finished_at = ev.at;
  if (p.job && p.job.error_kind !== ev.error_kind) job.error_title = job.error_advice = undefined;
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
  layout();
  if (continuation === id) setContinuation(null);
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
// Prompts are grouped by thread (a prompt and its follow-ups, through
// parent_id), each thread in creation order; threads are ordered by their
// newest prompt, so the one being written in is next to the compose box.

const itemHTML = `
  <article>
    <p class="parent" hidden>Continues <a class="parent-link" href="#"></a></p>
    <p class="question"></p>
    <p class="status"><span class="state"></span><span class="elapsed"></span><span class="attempt-count"></span></p>
    <p class="facts"><span class="asked"><time></time></span><span class="meta"></span><span class="tokens"></span></p>
    <div class="failure" hidden>
      <p class="failure-title"></p>
      <p class="failure-advice"></p>
      <details class="failure-details">
        <summary>Details</summary>
        <p><code class="error-kind"></code> <span class="error-message"></span></p>
      </details>
    </div>
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

const convHTML = `
  <div class="conv-bar" hidden>
    <span class="conv-title"></span>
    <button type="button" class="conv-toggle" aria-expanded="true"></button>
  </div>
  <ol class="prompts"></ol>`;

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
  p.el = li;
  $('empty').hidden = true;
  return li;
}

const parentOf = (p) => (p.prompt || p.sent || {}).parent_id || '';

// rootKey names p's thread: its oldest ancestor the page knows of, or,
// when that one continues a prompt the page has not read, that prompt.
function rootKey(p) {
  for (let i = 0; i < 10000; i++) {
    const up = parentOf(p);
    if (!up) return p.id;
    const parent = prompts.get(up);
    if (!parent) return up;
    p = parent;
  }
  return p.id;
}

// layout puts every prompt's element in its thread, and the threads and
// their prompts in order, moving only what is out of place. Prompt ids
// are UUIDv7, whose text order is the order in which the store created
// them — so completion order, or the order in which the page learns of
// prompts, never reorders a thread.
const convs = new Map(); // root key → the thread's element
function layout() {
  const groups = new Map();
  for (const p of [...prompts.values()].filter((x) => x.el).sort((x, y) => (x.id < y.id ? -1 : 1))) {
    const key = rootKey(p);
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(p);
  }
  for (const [key, el] of convs) {
    if (!groups.has(key)) { el.remove(); convs.delete(key); }
  }
  const order = [...groups.entries()].sort((x, y) => (x[1].at(-1).id < y[1].at(-1).id ? -1 : 1));
  let prev = null;
  for (const [key, ps] of order) {
    let conv = convs.get(key);
    if (!conv) {
      conv = document.createElement('li');
      conv.className = 'conv';
      conv.dataset.root = key;
      conv.innerHTML = convHTML;
      convs.set(key, conv);
    }
    const want = prev ? prev.nextSibling : thread.firstChild;
    if (want !== conv) thread.insertBefore(conv, want);
    prev = conv;
    const list = conv.querySelector('.prompts');
    let before = null;
    for (const p of ps) {
      const at = before ? before.nextSibling : list.firstChild;
      if (at !== p.el) list.insertBefore(p.el, at);
      before = p.el;
    }
    convBar(conv, ps.length);
  }
}

function convBar(conv, n) {
  const shut = collapsed.has(conv.dataset.root) && n > 1;
  conv.classList.toggle('is-collapsed', shut);
  conv.querySelector('.conv-bar').hidden = n < 2;
  conv.querySelector('.conv-title').textContent = 'Thread of ' + n + ' prompts';
  const b = conv.querySelector('.conv-toggle');
  b.setAttribute('aria-expanded', String(!shut));
  b.textContent = shut ? 'Show ' + (n - 1) + (n === 2 ? ' follow-up' : ' follow-ups') : 'Collapse';
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

// profileLabel is the profile's name for people (the id stays in the
// title); "" is the server's default profile.
function profileLabel(id) {
  const key = id || defaultProfile;
  return profileLabels.get(key) || (id ? id : 'Default');
}

// duration says ms for people: "4.2 s" (to a tenth below ten seconds
// when precise), "12 s", "3 min 5 s", "1 h 2 min".
function duration(ms, precise) {
  const sec = Math.max(0, ms) / 1000;
  if (sec < 10 && precise) return sec.toFixed(1) + ' s';
  if (sec < 60) return Math.floor(sec) + ' s';
  const min = Math.floor(sec / 60);
  if (min < 60) return min + ' min ' + Math.floor(sec % 60) + ' s';
  return Math.floor(min / 60) + ' h ' + (min % 60) + ' min';
}

const time = (t) => Date.parse(t || '') || 0;

// elapsedText: how long it has waited or run, live while it does; how
// long it took once finished.
function elapsedText(p, job) {
  const created = time(job.created_at) || p.sentAt || 0;
  if (job.state === 'queued') return created ? 'queued ' + duration(serverNow() - created) : '';
  if (job.state === 'running') {
    const started = time(job.started_at) || created;
    return started ? 'running ' + duration(serverNow() - started) : '';
  }
  const finished = time(job.finished_at);
  if (!created || !finished || job.state === 'superseded') return '';
  return 'took ' + duration(finished - created, true);
}

// askedText: when it was asked, in local time (with the date when not
// today), and how long ago.
function askedText(at) {
  const d = new Date(at);
  const today = new Date(serverNow()).toDateString() === d.toDateString();
  const clock = d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
  const when = today ? clock : d.toLocaleDateString([], { month: 'short', day: 'numeric' }) + ' ' + clock;
  const ago = (serverNow() - at) / 1000;
  let rel = '';
  if (ago < 60) rel = 'just now';
  else if (ago < 3600) rel = Math.floor(ago / 60) + ' min ago';
  else if (ago < 86400) rel = Math.floor(ago / 3600) + ' h ago';
  return 'asked ' + when + (rel ? ' (' + rel + ')' : '');
}

// renderTimes updates what changes with the clock alone.
function renderTimes(p) {
  const li = p.el;
  const job = p.job || { state: 'queued' };
  const set = (el, text) => { if (el.textContent !== text) el.textContent = text; };
  set(li.querySelector('.elapsed'), elapsedText(p, job));
  const at = time((p.prompt || {}).created_at) || p.sentAt || 0;
  const t = li.querySelector('.asked time');
  set(t, at ? askedText(at) : '');
  if (at) t.dateTime = new Date(at).toISOString();
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
  const parentID = parentOf(p);
  q('.parent').hidden = !parentID;
  if (parentID) {
    const parent = prompts.get(parentID);
    q('.parent-link').href = '#p-' + parentID;
    q('.parent-link').textContent = parent ? '“' + snippet(questionText(parent)) + '”' : 'an earlier prompt';
  }

  q('.state').textContent = stateLabel[job.state] || job.state;
  // Attempts: "attempt 2 of 3" while it runs or once answered, "tried
  // 3/3" once failed (the last attempt it had, or the one that could not
  // be retried).
  let count = '';
  if (job.attempt > 0 && job.max_attempts) {
    count = job.state === 'failed' ? 'tried ' + job.attempt + '/' + job.max_attempts
      : 'attempt ' + job.attempt + ' of ' + job.max_attempts;
  } else if (job.attempt > 1) count = 'attempt ' + job.attempt;
  q('.attempt-count').textContent = count;
  if (job.state === 'queued' && job.error_kind) {
    q('.attempt-count').textContent += (count ? ' · ' : '') + 'trying again after a failure';
  }

  const prompt = p.prompt || p.sent || {};
  const answered = job.state === 'succeeded' && p.answer && p.answer.job_id === job.id ? p.answer : null;
  const meta = [];
  // The model says who answered: "promptkit-simulated" when serve runs
  // without a configured backend.
  if (answered && answered.model) meta.push('model ' + answered.model);
  const profile = q('.meta');
  meta.push('profile ' + profileLabel(prompt.profile));
  profile.title = 'profile id: ' + (prompt.profile || defaultProfile || 'the server\'s default');
  // With a model group, which of the profile's backends answered.
  if (answered && answered.backend) meta.push('from ' + answered.backend);
  profile.textContent = meta.join(' · ');
  const usage = answered && answered.usage ? answered.usage : {};
  const tokens = [];
  if (usage.prompt_tokens != null) tokens.push(usage.prompt_tokens + ' in');
  if (usage.completion_tokens != null) tokens.push(usage.completion_tokens + ' out');
  q('.tokens').textContent = tokens.length ? 'tokens ' + tokens.join(' / ') : '';
  renderTimes(p);

  // A failure in words (the server's, for its kind), what to do about
  // it, and the developer's detail behind a toggle.
  const failed = job.state === 'failed';
  q('.failure').hidden = !failed;
  if (failed) {
    let title = job.error_title || 'It failed.';
    if (job.attempt > 1) title += ' promptkit tried ' + job.attempt + ' times.';
    q('.failure-title').textContent = title;
    q('.failure-advice').textContent = job.error_advice || '';
  }
  q('.error-kind').textContent = failed && job.error_kind ? job.error_kind : '';
  q('.error-message').textContent = failed ? job.error_message || '' : '';
  q('.failure-details').hidden = !(failed && (job.error_kind || job.error_message));

  q('.cancel').hidden = !inFlight(job);
  q('.retry').hidden = !failed;

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
    const how = j.error_kind ? 'failed: ' + (j.error_title || j.error_kind) + ' (' + j.error_kind + ')' : j.response_id ? 'answered' : 'stopped';
    item.textContent = 'Earlier attempt (' + how + '), replaced by a retry';
    return item;
  }));

  if (!li.isConnected || li.dataset.parent !== parentID) {
    li.dataset.parent = parentID;
    layout();
  }
  if (continuation) showContinuation();

  // A control that just went away (Cancel once cancelled, Retry once
  // retried) hands the focus to its prompt, not to the top of the page.
  if (focused && focused !== li && focused.closest('[hidden]')) li.focus();
}

// The clock moves what the cards say: how long a job has waited or run,
// and how long ago each prompt was asked.
setInterval(() => {
  prompts.forEach((p) => { if (p.el) renderTimes(p); });
}, 1000);

function announceState(p) {
  const s = p.job.state;
  if (s === 'running' || s === 'superseded') return; // too chatty
  let label = stateLabel[s];
  if (s === 'failed' && p.job.error_kind) label += ' (' + (p.job.error_title || p.job.error_kind) + ')';
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
    idle: live.down() ? 'Nothing running · checking every ' + idleMs / 1000 + ' s' : 'Nothing running',
    'signed-out': 'Needs a token',
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
    const p = record(r.prompt_id);
    p.sent = { text, parent_id: parent, profile };
    p.sentAt = serverNow();
    applyJob(p, { id: r.job_id, prompt_id: r.prompt_id, state: r.state });
    render(p);
    // In a thread, the next prompt follows this one: the thread goes on
    // until the user leaves it.
    if (parent && continuation === parent) setContinuation(p.id, false);
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

// setContinuation makes the tab's next prompt follow id (null: start a
// new thread), and focuses the compose box unless told not to.
function setContinuation(id, focus = true) {
  continuation = id;
  try {
    if (id) sessionStorage.setItem(continuationKey, id); else sessionStorage.removeItem(continuationKey);
  } catch { /* storage disabled: the thread lasts until a reload */ }
  showContinuation();
  if (id && focus) textEl.focus();
}

// showContinuation shows which thread the next prompt goes on: its first
// prompt, linked to the newest, which the next prompt follows.
function showContinuation() {
  $('continuing').hidden = !continuation;
  if (!continuation) return;
  const p = prompts.get(continuation);
  const root = p ? prompts.get(rootKey(p)) : null;
  const link = $('continuing-link');
  link.href = '#p-' + continuation;
  const text = root ? '“' + snippet(questionText(root), 40) + '”' : p ? '“' + snippet(questionText(p), 40) + '”' : 'an earlier prompt';
  if (link.textContent !== text) link.textContent = text;
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
  defaultProfile = r.default || '';
  for (const [id, label] of Object.entries(r.labels || {})) profileLabels.set(id, label);
  // Labels for people; the id stays the value, and shows as the title.
  const first = select.options[0];
  if (r.default) {
    const label = profileLabel(r.default);
    first.textContent = label.toLowerCase() === 'default' ? label : 'Default (' + label + ')';
    first.title = 'profile id: ' + r.default;
  }
  for (const id of r.profiles) {
    if (id === r.default || [...select.options].some((o) => o.value === id)) continue;
    const o = new Option(profileLabel(id), id);
    o.title = 'profile id: ' + id;
    select.append(o);
  }
  select.value = chosen;
  prompts.forEach((p) => { if (p.el) render(p); });
}

function askForToken(message) {
  $('auth').hidden = false;
  if (message) $('auth-help').textContent = message;
}

async function boot() {
  $('empty').hidden = false;
  if (!localMode) askForToken();
  if (!localMode && !getToken()) {
    showMode('signed-out');
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
  let kept = null;
  try { kept = sessionStorage.getItem(continuationKey); } catch { /* none */ }
  if (kept) setContinuation(kept, false);
  thread.lastElementChild?.scrollIntoView({ block: 'end' });
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
  if (button && button.classList.contains('conv-toggle')) {
    const conv = button.closest('li.conv');
    const key = conv.dataset.root;
    if (collapsed.has(key)) collapsed.delete(key); else collapsed.add(key);
    convBar(conv, conv.querySelectorAll('li.prompt').length);
    return;
  }
  const li = e.target.closest('li.prompt');
  const p = li && prompts.get(li.dataset.promptId);
  if (!button || !p) return;
  if (button.classList.contains('cancel')) cancel(p);
  else if (button.classList.contains('retry')) retry(p);
  else if (button.classList.contains('copy')) copy(p, button);
  else if (button.classList.contains('continue')) setContinuation(p.id);
});

// The compose box's height, for the cards' scroll margin: a card
// scrolled into view lands above the box, never under it.
new ResizeObserver(() => {
  document.documentElement.style.setProperty('--compose-h', $('compose').offsetHeight + 'px');
}).observe($('compose'));

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
