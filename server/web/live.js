// Live updates (seed §6): the server's event stream (GET /v1/events) while
// it works; while it does not, polling GET /v1/recent every pollMs — but
// only while some job is queued or running, so an idle tab costs nothing.

export class Live {
  // useStream: false when requests need a bearer token, which EventSource
  //   cannot send; the page then polls while something is in flight.
  // onEvent(data): a job.state_changed event.
  // poll(): one /v1/recent round; the caller merges what it returns.
  // busy(): whether a job the page shows is queued or running.
  // onMode(mode): 'connecting', 'live', 'polling' or 'idle', for the page
  //   to show (and for tests to wait on).
  constructor({ pollMs, useStream, onEvent, onOpen, poll, busy, onMode }) {
    Object.assign(this, { pollMs, useStream, onEvent, onOpen, poll, busy, onMode });
    this.es = null;
    this.up = false;        // the stream is open
    this.failed = false;    // the stream failed and has not reopened since
    this.timer = null;      // the next poll, when one is scheduled
    this.polling = false;   // a poll request is out
    this.retryMs = 1000;    // our own reconnect delay, after the browser gives up
    this.pollNow = true;    // the first poll after the stream fails is immediate
  }

  start() {
    if (this.useStream) this.connect();
    this.wake();
  }

  // stopStream ends the stream for good (the server now wants a token).
  stopStream() {
    this.useStream = false;
    if (this.es) this.es.close();
    this.es = null;
    this.up = false;
    this.wake();
  }

  // down: updates must come from polling.
  down() { return !this.useStream || this.failed; }

  connect() {
    if (!this.useStream) return;
    const es = new EventSource('/v1/events');
    this.es = es;
    es.addEventListener('open', () => {
      const reopened = this.failed;
      this.up = true;
      this.failed = false;
      this.retryMs = 1000;
      this.pollNow = true;
      this.cancelPoll();
      this.mode('live');
      // Catch up on what changed while the stream was down: a new
      // EventSource does not replay (only the browser's own reconnects
      // send Last-Event-ID).
      if (reopened) this.onOpen();
    });
    es.addEventListener('job.state_changed', (e) => {
      let data;
      try { data = JSON.parse(e.data); } catch { return; }
      this.onEvent(data);
    });
    es.addEventListener('error', () => {
      this.up = false;
      this.failed = true;
      if (es.readyState === EventSource.CLOSED && this.es === es) {
        // The browser gave up (an error status, a proxy's page): it will
        // not reconnect, so we do, later and less often each time.
        this.es = null;
        setTimeout(() => this.connect(), this.retryMs);
        this.retryMs = Math.min(this.retryMs * 2, 30000);
      }
      this.wake();
    });
  }

  // wake is called whenever something may have started or stopped being
  // in flight: it starts or stops the polling loop accordingly.
  wake() {
    if (!this.down()) return this.mode(this.up ? 'live' : 'connecting');
    if (this.polling || this.timer !== null) return;
    if (!this.busy()) {
      this.pollNow = true;
      return this.mode('idle');
    }
    this.mode('polling');
    const delay = this.pollNow ? 0 : this.pollMs;
    this.pollNow = false;
    this.timer = setTimeout(() => this.tick(), delay);
  }

  async tick() {
    this.timer = null;
    if (!this.down() || !this.busy()) return this.wake();
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
