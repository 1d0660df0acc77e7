// Live updates (seed §6): the server's event stream (GET /v1/events) while
// it works; while it does not, polling GET /v1/recent — every pollMs while
// some job the page shows is queued or running, every idleMs otherwise —
// so the page still shows all the stream would (prompts sent from other
// tabs and clients too), and an idle tab costs a request per idleMs.
// With a bearer token the stream is opened with a single-use ticket
// (POST /v1/events/ticket), and each reconnection asks for a new one and
// resumes after the last event received (?last_event_id=).

export class Live {
  // useStream: whether to use the event stream at all.
  // streamURL(lastId): the URL to open the stream at (a promise), resuming
  //   after event lastId when not null. With a bearer token it holds a
  //   single-use ticket (EventSource cannot send the header), so each
  //   (re)connection asks for a new one; a rejection counts as a failed
  //   connection.
  // ticketed: the URL is single-use: on any error the browser's own
  //   reconnect would be refused, so we reconnect ourselves.
  // onEvent(data): a job.state_changed event.
  // onOpen(): the stream reopened without replaying what was missed; the
  //   caller catches up by polling once.
  // poll(): one /v1/recent round; the caller merges what it returns.
  // busy(): whether a job the page shows is queued or running.
  // idleMs: the polling interval while none is.
  // onMode(mode): 'connecting', 'live', 'polling', 'idle' or 'signed-out'
  //   (after stopStream), for the page to show (and for tests to wait on).
  constructor({ pollMs, idleMs, useStream, streamURL, ticketed, onEvent, onOpen, poll, busy, onMode }) {
    Object.assign(this, { pollMs, idleMs, useStream, streamURL, ticketed, onEvent, onOpen, poll, busy, onMode });
    this.es = null;
    this.up = false;        // the stream is open
    this.failed = false;    // the stream failed and has not reopened since
    this.timer = null;      // the next poll, when one is scheduled
    this.timerBusy = false; // whether it was scheduled at the busy interval
    this.polling = false;   // a poll request is out
    this.retryMs = 1000;    // our own reconnect delay, when the browser will not
    this.pollNow = true;    // the next poll is at once, if a job is in flight
    this.lastId = null;     // the id of the last event received
    this.opening = false;   // a connect is waiting for its URL
    this.retry = null;      // our next reconnect, when one is scheduled
    this.stopped = false;   // stopStream was called: nothing more to do
  }

  start() {
    if (this.useStream) this.connect();
    this.wake();
  }

  // stopStream ends the stream, and polling, for good: the server now
  // wants a token, and the page starts over once it has one.
  stopStream() {
    this.useStream = false;
    this.stopped = true;
    if (this.es) this.es.close();
    this.es = null;
    this.up = false;
    if (this.retry !== null) clearTimeout(this.retry);
    this.retry = null;
    this.cancelPoll();
    this.mode('signed-out');
  }

  // down: updates must come from polling.
  down() { return !this.useStream || this.failed; }

  async connect() {
    if (!this.useStream || this.opening || this.es) return;
    this.opening = true;
    const resumeFrom = this.lastId;
    let url;
    try {
      url = await this.streamURL(resumeFrom);
    } catch {
      url = null;
    } finally {
      this.opening = false;
    }
    if (!this.useStream || this.es) return;
    if (url === null) return this.lost();
    const es = new EventSource(url);
    this.es = es;
    es.addEventListener('open', () => {
      const reopened = this.failed;
      this.up = true;
      this.failed = false;
      this.retryMs = 1000;
      this.pollNow = true;
      this.cancelPoll();
      this.mode('live');
      // Catch up on what changed while the stream was down, unless the
      // server replays it (we resumed after an event we know).
      if (reopened && resumeFrom === null) this.onOpen();
    });
    es.addEventListener('job.state_changed', (e) => {
      if (e.lastEventId) this.lastId = e.lastEventId;
      let data;
      try { data = JSON.parse(e.data); } catch { return; }
      this.onEvent(data);
    });
    es.addEventListener('error', () => {
      if (this.es !== es) return;
      this.up = false;
      this.failed = true;
      if (this.ticketed || es.readyState === EventSource.CLOSED) {
        // The browser gave up (an error status, a proxy's page), or would
        // retry with a spent ticket: we reconnect ourselves.
        es.close();
        this.es = null;
        return this.lost();
      }
      this.wake();
    });
  }

  // lost: the stream is down and the browser will not reopen it. Poll
  // meanwhile (when something is in flight) and reconnect: after a second,
  // then later and less often each time until a stream opens.
  lost() {
    this.up = false;
    this.failed = true;
    if (this.useStream && this.retry === null) {
      const delay = this.retryMs;
      this.retryMs = Math.min(this.retryMs * 2, 30000);
      this.retry = setTimeout(() => { this.retry = null; this.connect(); }, delay);
    }
    this.wake();
  }

  // wake is called whenever something may have started or stopped being
  // in flight: it (re)schedules the next poll at the interval that now
  // applies — a poll due in idleMs comes sooner once a job is in flight.
  wake() {
    if (!this.down()) {
      this.cancelPoll();
      return this.mode(this.up ? 'live' : 'connecting');
    }
    if (this.polling || this.stopped) return;
    const busy = this.busy();
    this.mode(busy ? 'polling' : 'idle');
    if (this.timer !== null) {
      if (this.timerBusy === busy) return;
      this.cancelPoll();
    }
    // The first poll once a job is in flight is at once; idle, the
    // stream may well come back first (and resume where it was).
    const delay = !busy ? this.idleMs : this.pollNow ? 0 : this.pollMs;
    this.pollNow = !busy;
    this.timerBusy = busy;
    this.timer = setTimeout(() => this.tick(), delay);
  }

  async tick() {
    this.timer = null;
    if (!this.down()) return this.wake();
    this.polling = true;
    try {
      await this.poll();
    } catch {
      // Server unreachable: try again at the next tick.
    } finally {
      this.polling = false;
    }
    this.wake();
  }

  cancelPoll() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  mode(m) {
    if (this.current !== m) {
      this.current = m;
      this.onMode(m);
    }
  }
}
