// The operator's dashboard: the queue at a glance, jobs by filter with
// each attempt placed in time, bulk cancel and retry, batches, backends
// and workers with pause, resume and drain, and tokens. Everything comes
// from /v1/admin (server/internal/admin); this page only shows it, and
// builds the DOM from text nodes, never from HTML strings.

import { api, getToken, setToken, onUnauthorized, withoutToken } from './api.js';

const $ = (id) => document.getElementById(id);
const pollMs = Number(document.body.dataset.pollMs) || 2000;
const localMode = document.body.dataset.local === 'true';
if (localMode) withoutToken();

// h builds an element: h('td', { class: 'x', onclick: f }, 'text', child).
function h(tag, props = {}, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === 'class') el.className = v;
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat()) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

const fmtTime = (t) => (t ? new Date(t).toLocaleString() : '–');
const fmtClock = (t) => (t ? new Date(t).toLocaleTimeString() : '–');
function fmtMs(ms) {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
}
const fmtUSD = (v) => (v === null || v === undefined ? 'unknown' : `$${v.toFixed(v < 0.01 ? 6 : 4)}`);
const known = (v) => v !== null && v !== undefined;

function fill(tbody, rows) { tbody.replaceChildren(...rows); }

// ---- status and errors

function status(text) { $('status').textContent = text; }
function showError(e) {
  $('error').textContent = e ? (e.message || String(e)) : '';
}
onUnauthorized(() => { $('auth').hidden = false; status('A token is needed.'); });
$('auth-form').addEventListener('submit', (ev) => {
  ev.preventDefault();
  setToken($('token').value.trim());
  $('auth').hidden = true;
  showError(null);
  refresh();
});

// ---- routing: #overview, #jobs?state=failed, #job/ID, #batches, …

const views = ['overview', 'jobs', 'job', 'batches', 'backends', 'workers', 'tokens'];
function current() {
  const raw = location.hash.replace(/^#/, '') || 'overview';
  const [path, query = ''] = raw.split('?');
  const [view, id] = path.split('/');
  return { view: views.includes(view) ? view : 'overview', id: id ? decodeURIComponent(id) : '', query: new URLSearchParams(query) };
}

const loaders = { overview: loadOverview, jobs: loadJobs, job: loadJob, batches: loadBatches, backends: loadBackends, workers: loadWorkers, tokens: loadTokens };
// Views that read again every pollMs while the tab is visible.
const live = new Set(['overview', 'job', 'batches', 'backends', 'workers']);

// refresh shows the view the address names. One runs at a time; one asked
// for meanwhile (a click, an action, a poll) runs once the current one
// ends, so the view always catches up with the last request.
let loading = null; // the refresh in progress
let again = false; // another was asked for meanwhile
async function refresh() {
  if (loading) {
    again = true;
    return loading;
  }
  loading = (async () => {
    do {
      again = false;
      await show();
    } while (again);
  })();
  try {
    await loading;
  } finally {
    loading = null;
  }
}

async function show() {
  const r = current();
  for (const v of views) $('view-' + v).hidden = v !== r.view;
  for (const a of document.querySelectorAll('nav a[data-view]')) {
    if (a.dataset.view === r.view || (r.view === 'job' && a.dataset.view === 'jobs')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  try {
    await loaders[r.view](r);
    status(`Updated ${new Date().toLocaleTimeString()}`);
    document.body.dataset.loaded = r.view;
    showError(null);
  } catch (e) {
    if (e.status === 401) return;
    showError(e);
    status('Not updated: ' + (e.message || 'error'));
  }
}

window.addEventListener('hashchange', () => { jobsCursor = ''; refresh(); });
setInterval(() => {
  const r = current();
  if (document.visibilityState !== 'visible' || !$('auth').hidden) return;
  if (live.has(r.view) || (r.view === 'jobs' && jobsCursor === '')) refresh();
}, pollMs);

// ---- overview

const tileStates = ['queued', 'running', 'failed', 'succeeded', 'cancelled'];
const stateWords = { queued: 'Queued', running: 'Running', failed: 'Failed', succeeded: 'Succeeded', cancelled: 'Cancelled', superseded: 'Retried' };

// showScope hides what the caller may not see: an org's admin has no
// Backends or Workers (they are every org's).
function showScope(o) {
  for (const v of ['backends', 'workers']) document.querySelector(`nav a[data-view=${v}]`).hidden = !o.operator;
  document.body.dataset.operator = o.operator;
}

async function loadOverview() {
  const o = await api('GET', '/v1/admin/overview');
  showScope(o);
  $('tiles').replaceChildren(...tileStates.map((s) => h('a', { class: 'tile is-' + s, href: '#jobs?state=' + s, dataset: { state: s } },
    h('span', { class: 'n' }, o.counts[s] ?? 0), h('span', { class: 'label' }, stateWords[s]))));
  const failed = Math.round(Object.values(o.error_rate || {}).reduce((a, b) => a + b, 0) * o.finished);
  $('overview-window').textContent = `In the last ${Math.round(o.window_seconds / 60)} minutes: ${o.finished} finished, ${failed} failed` +
    (o.finished ? `; p50 ${fmtMs(o.latency_p50_ns / 1e6)}, p95 ${fmtMs(o.latency_p95_ns / 1e6)}.` : '.');
  fill($('orgs').tBodies[0], o.orgs.map((org) => h('tr', { dataset: { org: org.org_id } },
    h('th', { scope: 'row' }, h('a', { href: '#jobs?org=' + encodeURIComponent(org.org_id) }, org.org_id)),
    h('td', {}, org.counts.queued), h('td', {}, org.counts.running), h('td', {}, org.counts.failed),
    h('td', {}, org.failed_in_window), h('td', {}, org.counts.succeeded),
    h('td', {}, org.paused ? h('span', { class: 'badge is-paused' }, 'paused') : 'running', ' ',
      h('button', { type: 'button', class: 'small', onclick: () => act('POST', `/v1/admin/orgs/${encodeURIComponent(org.org_id)}/${org.paused ? 'resume' : 'pause'}`) },
        org.paused ? 'Resume' : 'Pause')))));
}

// act sends a change, then shows the view again.
async function act(method, path, body) {
  try {
    const out = await api(method, path, body);
    await refresh();
    return out;
  } catch (e) {
    showError(e);
    return null;
  }
}

// ---- jobs

let jobsCursor = ''; // the page shown: '' is the newest
let nextCursor = '';
const filterNames = ['state', 'org', 'user', 'profile', 'backend', 'min_priority', 'max_priority', 'since', 'until', 'batch'];

// datetime-local inputs hold local time without a zone; the API takes
// RFC 3339.
function toLocalInput(iso) {
  const d = new Date(iso);
  if (isNaN(d)) return '';
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

// The filter the jobs view shows, from the address: one source of truth,
// so a filtered view can be bookmarked and the bulk actions act on what
// the table shows.
function appliedFilter() {
  const q = current().query;
  const f = {};
  for (const n of filterNames) {
    const v = q.get(n);
    if (!v) continue;
    f[n] = n.endsWith('priority') ? Number(v) : v;
  }
  return f;
}

$('filters').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const q = new URLSearchParams();
  for (const n of filterNames) {
    let v = ev.target.elements[n].value.trim();
    if (!v) continue;
    if (n === 'since' || n === 'until') v = new Date(v).toISOString();
    q.set(n, v);
  }
  hideConfirm();
  location.hash = '#jobs' + (q.toString() ? '?' + q : '');
});
$('filters-clear').addEventListener('click', () => { location.hash = '#jobs'; });
$('jobs-next').addEventListener('click', () => { jobsCursor = nextCursor; refresh(); });
$('jobs-first').addEventListener('click', () => { jobsCursor = ''; refresh(); });

async function loadJobs(r) {
  const form = $('filters').elements;
  for (const n of filterNames) {
    const v = r.query.get(n) || '';
    form[n].value = (n === 'since' || n === 'until') && v ? toLocalInput(v) : v;
  }
  const q = new URLSearchParams(r.query);
  q.set('limit', '50');
  if (jobsCursor) q.set('cursor', jobsCursor);
  const page = await api('GET', '/v1/admin/jobs?' + q);
  nextCursor = page.next_cursor || '';
  $('jobs-next').hidden = !nextCursor;
  $('jobs-first').hidden = !jobsCursor;
  $('jobs-empty').hidden = page.jobs.length > 0;
  fill($('jobs').tBodies[0], page.jobs.map(({ job: j, profile, summary }) => h('tr', { dataset: { job: j.id, state: j.state } },
    h('td', {}, h('a', { href: '#job/' + j.id }, fmtTime(j.created_at))),
    h('td', {}, h('span', { class: 'badge is-' + j.state }, stateWords[j.state] || j.state)),
    h('td', {}, j.org_id), h('td', {}, j.created_by), h('td', {}, profile || 'default'),
    h('td', {}, j.priority), h('td', {}, `${j.attempt}/${j.max_attempts}`),
    h('td', {}, j.error_kind || ''), h('td', { class: 'summary' }, summary))));
}

// Bulk actions: count first, then act on confirmation.
let pending = null; // { verb, path, filter, matched }
function hideConfirm() { $('bulk-confirm').hidden = true; pending = null; }
async function askBulk(verb, path) {
  $('bulk-result').textContent = '';
  const filter = appliedFilter();
  if (Object.keys(filter).length === 0) {
    $('bulk-result').textContent = 'Set a filter first: a bulk action acts on the jobs the filter matches.';
    return;
  }
  let count;
  try {
    count = await api('POST', path, { filter, dry_run: true });
  } catch (e) {
    $('bulk-result').textContent = e.message;
    return;
  }
  if (count.matched === 0) {
    $('bulk-result').textContent = `No job matching this filter can be ${verb === 'cancel' ? 'cancelled' : 'retried'}.`;
    return;
  }
  pending = { verb, path, filter, matched: count.matched };
  const noun = count.matched === 1 ? 'job' : 'jobs';
  $('bulk-question').textContent = `${count.matched} ${noun} match this filter and can be ${verb === 'cancel' ? 'cancelled' : 'retried'}. ${verb === 'cancel' ? 'Cancel' : 'Retry'} them?`;
  $('bulk-go').textContent = `${verb === 'cancel' ? 'Cancel' : 'Retry'} ${count.matched} ${noun}`;
  $('bulk-go').dataset.matched = count.matched;
  $('bulk-confirm').hidden = false;
  $('bulk-go').focus();
}
$('bulk-cancel').addEventListener('click', () => askBulk('cancel', '/v1/admin/jobs/cancel'));
$('bulk-retry').addEventListener('click', () => askBulk('retry', '/v1/admin/jobs/retry'));
$('bulk-no').addEventListener('click', hideConfirm);
$('bulk-go').addEventListener('click', async () => {
  if (!pending) return;
  const p = pending;
  hideConfirm();
  try {
    const res = await api('POST', p.path, { filter: p.filter });
    const did = p.verb === 'cancel' ? 'Cancelled' : 'Retried';
    let text = `${did} ${res.done} of ${res.matched}`;
    if (res.skipped) text += ` (${res.skipped} changed meanwhile)`;
    if (res.truncated) text += '; more matched: run it again for the rest';
    $('bulk-result').textContent = text + '.';
    $('bulk-result').dataset.done = res.done;
    jobsCursor = '';
    await refresh();
  } catch (e) {
    $('bulk-result').textContent = e.message;
  }
});

// ---- one job

function fact(dt, dd) { return [h('dt', {}, dt), h('dd', {}, dd)]; }
// tokens sums the usages of calls as their attempt events have them: each
// count {"value": n}, absent when unknown. A count no call reported is
// "?"; one some calls did not report is a lower bound, "≥ n". Cached
// tokens (a part of the input) and reasoning tokens (a part of the output)
// show when some call reported them.
function tokens(usages) {
  const sum = (k) => {
    const vs = usages.map((u) => u?.[k]?.value).filter(known);
    if (!vs.length) return null;
    const total = vs.reduce((a, b) => a + b, 0).toLocaleString();
    return vs.length < usages.length ? `≥ ${total}` : total;
  };
  const i = sum('prompt_tokens'), o = sum('completion_tokens');
  if (i === null && o === null) return 'unknown';
  const c = sum('cached_tokens'), r = sum('reasoning_tokens');
  return `${i ?? '?'} in${c === null ? '' : ` (${c} cached)`} · ${o ?? '?'} out${r === null ? '' : ` (${r} reasoning)`}`;
}
// jobTokens is the tokens of every call the job made, as its cost sums
// them, with a note when some count is a lower bound.
function jobTokens(steps) {
  const calls = steps.filter((s) => s.dispatched);
  if (!calls.length) return '–';
  const text = tokens(calls.map((s) => s.usage));
  if (!text.includes('≥')) return text;
  return [text, h('span', { class: 'muted', id: 'job-tokens-note' }, ' (≥: some calls did not report that count)')];
}

async function loadJob(r) {
  const d = await api('GET', '/v1/admin/jobs/' + encodeURIComponent(r.id));
  const j = d.job;
  $('job-title').textContent = `Job ${j.id}`;
  const resp = d.response;
  $('job-facts').replaceChildren(
    ...fact('State', h('span', { class: 'badge is-' + j.state, id: 'job-state' }, stateWords[j.state] || j.state)),
    ...fact('Organisation · user', `${j.org_id} · ${j.created_by}`),
    ...fact('Profile', d.prompt.profile || 'default'),
    ...fact('Priority', j.priority),
    ...fact('Attempt', `${j.attempt} of ${j.max_attempts}`),
    ...fact('Created', fmtTime(j.created_at)),
    ...fact('Started · finished', `${fmtTime(j.started_at)} · ${fmtTime(j.finished_at)}`),
    ...fact('Worker', j.worker_claim || '–'),
    ...fact('Answered by', resp ? `${resp.model || '?'}${resp.backend ? ' on ' + resp.backend : ''}` : '–'),
    ...fact('Tokens', jobTokens(d.timeline)),
    ...fact('Cost', fmtUSD(d.cost_usd)),
    ...(d.history.length > 1 ? fact('Retries of this prompt', d.history.map((x) => h('a', { href: '#job/' + x.id, class: x.id === j.id ? 'here' : '' }, stateWords[x.state] || x.state)).flatMap((a, i) => (i ? [' → ', a] : [a]))) : []),
  );
  const err = $('job-error');
  err.hidden = !j.error_kind;
  err.textContent = j.error_kind ? `${j.error_kind}: ${j.error_message || ''}` : '';

  const turns = d.thread.map((t) => h('li', {}, h('p', { class: 'ask' }, t.text || '(a named prompt)'),
    t.answered ? h('p', { class: 'answer' }, t.answer) : h('p', { class: 'muted' }, 'no answer')));
  const p = d.prompt;
  const asked = p.chat ? p.chat.messages.map((m) => h('p', { class: 'ask' }, h('b', {}, m.role + ': '), m.content))
    : [h('p', { class: 'ask' }, p.text || (p.prompt_ref ? `prompt ${p.prompt_ref}` : '(embedding)'))];
  turns.push(h('li', { class: 'this' }, ...asked, resp ? h('p', { class: 'answer' }, resp.output) : null));
  $('job-thread').replaceChildren(...turns);

  const steps = d.timeline;
  $('job-timeline-empty').hidden = steps.length > 0;
  // One time axis for every call: from the first wait to the last end, so
  // the bars line up as on a clock and a retry's delay shows as the gap.
  const t = (iso) => new Date(iso).getTime();
  const t0 = Math.min(...steps.map((s) => t(s.started_at) - s.wait_before_ms));
  const span = Math.max(1, ...steps.map((s) => t(s.ended_at) - t0));
  // Widths go through the CSSOM: the page's CSP refuses style attributes.
  const seg = (cls, ms, title) => {
    const el = h('span', { class: 'seg ' + cls, title });
    el.style.width = `${(100 * Math.max(0, ms)) / span}%`;
    return el;
  };
  $('job-timeline').replaceChildren(...steps.map((s) => {
    const failed = s.outcome !== 'success';
    const label = [
      `Job attempt ${s.job_attempt}, call ${s.attempt}`,
      s.backend ? `backend ${s.backend}` : null,
      s.status_code ? `HTTP ${s.status_code}` : (s.dispatched ? 'no HTTP status' : 'not sent'),
      failed ? (s.failure || s.outcome) : 'answered',
      s.wait_before_ms ? `waited ${fmtMs(s.wait_before_ms)} before` : null,
      s.capacity_wait_ms ? `capacity wait ${fmtMs(s.capacity_wait_ms)}` : null,
      `generation ${fmtMs(s.generation_ms)}`,
      s.usage ? tokens([s.usage]) + ' tokens' : null,
      known(s.cost_usd) ? fmtUSD(s.cost_usd) : null,
    ].filter(Boolean).join(' · ');
    return h('li', { class: failed ? 'step is-failed' : 'step', dataset: { status: s.status_code || 0, backend: s.backend || '' } },
      h('div', { class: 'bar', 'aria-hidden': 'true' },
        seg('lead', t(s.started_at) - s.wait_before_ms - t0, ''),
        seg('wait', s.wait_before_ms, 'waiting (retry delay or queue)'),
        seg('capacity', s.capacity_wait_ms, 'capacity wait'),
        seg('gen', s.generation_ms, 'generation')),
      h('p', { class: 'step-label' }, `${fmtClock(s.started_at)} · ${label}`));
  }));

  fill($('job-events').tBodies[0], d.events.map((e) => h('tr', {},
    h('td', {}, e.seq), h('td', {}, fmtClock(e.at)),
    h('td', {}, e.type === 'attempt' ? 'attempt' : `${e.from || '·'} → ${e.to}`),
    h('td', { class: 'detail' }, e.data ? JSON.stringify(e.data) : ''))));
  // A finished job changes no more: stop reading it again.
  if (!['queued', 'running'].includes(j.state)) live.delete('job'); else live.add('job');
}

// ---- batches

async function loadBatches() {
  const page = await api('GET', '/v1/admin/batches?limit=100');
  $('batches-empty').hidden = page.batches.length > 0;
  fill($('batches').tBodies[0], page.batches.map((b) => {
    const c = b.request_counts, done = c.completed + c.failed;
    return h('tr', { dataset: { batch: b.id } },
      h('th', { scope: 'row' }, h('a', { href: '#jobs?batch=' + encodeURIComponent(b.id) }, b.id)),
      h('td', {}, b.org_id), h('td', {}, b.status),
      h('td', {}, h('progress', { max: c.total || 1, value: done }), ` ${done} of ${c.total} (${c.failed} failed)`),
      h('td', {}, fmtTime(b.created_at)));
  }));
}

// ---- backends

const sources = { configured: 'configured', 429: 'learned from 429s', headers: "provider's headers", '': 'unpaced' };
async function loadBackends() {
  const out = await api('GET', '/v1/admin/backends');
  $('backends-window').textContent = `Calls, 429s and errors: the last ${Math.round(out.window_seconds / 60)} minutes, every process` +
    (out.lost_calls ? `, and ${out.lost_calls} calls lost with a worker, backend unknown` : '') +
    '. In flight: calls on the backend or waiting for it now.';
  fill($('backends').tBodies[0], out.backends.map((b) => {
    const st = [];
    if (b.paused) st.push(h('span', { class: 'badge is-paused' }, 'paused'));
    if (b.rate_limited_until) st.push(h('span', { class: 'badge is-limited' }, `rate limited until ${fmtClock(b.rate_limited_until)}`));
    if (b.cooldown_until) st.push(h('span', { class: 'badge is-failed' }, `cooling down until ${fmtClock(b.cooldown_until)}`));
    if (!st.length) st.push(b.unwell ? 'probing' : 'ok');
    const rate = b.requests_per_second ? `${b.requests_per_second.toFixed(2)} req/s (${sources[b.source] ?? b.source})` : 'unpaced';
    return h('tr', { dataset: { backend: b.id, paused: b.paused } },
      h('th', { scope: 'row' }, h('a', { href: '#jobs?backend=' + encodeURIComponent(b.id) }, b.id)),
      h('td', { class: 'state' }, ...st), h('td', {}, rate), h('td', {}, b.in_flight),
      h('td', {}, b.recent.calls), h('td', { class: b.recent.rate_limited ? 'warn' : '' }, b.recent.rate_limited),
      h('td', { class: b.recent.errors ? 'warn' : '' }, b.recent.errors), h('td', {}, b.recent.last_rate_limited_at ? fmtClock(b.recent.last_rate_limited_at) : '–'),
      h('td', {}, h('button', { type: 'button', class: 'small', onclick: () => act('POST', `/v1/admin/backends/${encodeURIComponent(b.id)}/${b.paused ? 'resume' : 'pause'}`) },
        b.paused ? 'Resume' : 'Pause')));
  }));
}

// ---- workers

async function loadWorkers() {
  const out = await api('GET', '/v1/admin/workers');
  $('workers-empty').hidden = out.workers.length > 0;
  fill($('workers').tBodies[0], out.workers.map((w) => h('tr', { dataset: { worker: w.worker } },
    h('th', { scope: 'row' }, w.worker), h('td', {}, `${w.host} (pid ${w.pid})`), h('td', {}, w.running),
    h('td', {}, fmtTime(w.started_at)), h('td', {}, fmtClock(w.seen_at)),
    h('td', {}, w.draining ? (w.running ? 'draining' : 'drained') : 'claiming'),
    h('td', {}, h('button', { type: 'button', class: 'small', onclick: () => act('POST', `/v1/admin/workers/${encodeURIComponent(w.worker)}/${w.draining ? 'undrain' : 'drain'}`) },
      w.draining ? 'Undo drain' : 'Drain')))));
}

// ---- tokens

async function loadTokens() {
  $('token-local').hidden = !localMode;
  const out = await api('GET', '/v1/admin/tokens');
  fill($('tokens').tBodies[0], out.tokens.map((t) => h('tr', { dataset: { token: t.id } },
    h('th', { scope: 'row' }, t.id), h('td', {}, t.org_id), h('td', {}, t.user_id), h('td', {}, t.role),
    h('td', {}, fmtTime(t.created_at)), h('td', {}, t.revoked_at ? `revoked ${fmtTime(t.revoked_at)}` : 'valid'),
    h('td', {}, t.revoked_at ? '' : revokeButton(t)))));
}

// revokeButton asks once more before revoking: a revoked token cannot be
// brought back.
function revokeButton(t) {
  const b = h('button', { type: 'button', class: 'small' }, 'Revoke');
  b.addEventListener('click', () => {
    if (b.dataset.armed) return act('POST', `/v1/admin/tokens/${encodeURIComponent(t.id)}/revoke`);
    b.dataset.armed = 'true';
    b.textContent = 'Really revoke?';
    b.classList.add('danger');
  });
  return b;
}

$('token-create').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = ev.target.elements;
  const t = await act('POST', '/v1/admin/tokens', { org: f.org.value.trim(), user: f.user.value.trim(), role: f.role.value });
  if (!t) return;
  $('token-secret-id').textContent = `${t.id} (${t.role} of ${t.org_id})`;
  $('token-secret-value').textContent = t.secret;
  const box = $('token-secret');
  box.querySelector('button')?.remove();
  if (localMode && t.role !== 'member') {
    box.append(h('button', { type: 'button', onclick: () => { setToken(t.secret); location.reload(); } }, 'Use this token in this browser'));
  }
  box.hidden = false;
  ev.target.reset();
});

// ---- start

if (!localMode && !getToken()) {
  $('auth').hidden = false;
  status('A token is needed.');
} else {
  refresh();
  if (current().view !== 'overview') api('GET', '/v1/admin/overview').then(showScope).catch(() => {});
}
