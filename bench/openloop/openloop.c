// An open-loop HTTP/1.1 load generator with latency correction, as wrk2 does it (wrk2 is not in
// Debian): requests are due at fixed times, start + k / rate, whatever the answers do; each due
// request goes out on the next idle keep-alive connection, and its latency is measured from the time
// it was due, not from when it was sent, so a stalled server is charged for the requests it held back
// (coordinated omission). One thread, epoll, a timerfd for the next due time; latencies in a
// log-linear histogram (1 us steps to 256 us, then 128 steps per doubling: under 0.8% apart).
//
//   openloop --host 127.0.0.1 --port 8080 --rate 1000 --duration 10 --connections 64
//            [--drain 5] [--timeout 5] [--seed 1] [--header 'Name: value']...
//            --part 's:/q/account?aid=' --part 'c:1:1:123456789' --part 'c:0:5:0123456789'
//   openloop --histogram-test < microseconds, one a line      (percentiles of the values read)
//   openloop --expand-test N --seed 1 --part ...              (N paths, one a line)
//
// A path is its parts in turn: 's:<literal>' as written, 'c:<min>:<max>:<chars>' as min to max
// characters drawn from chars (bench/load.ts's URL patterns, parsed there). Prints one JSON object.
// Built by bench/openloop.ts with cc -O2.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

// ---------------------------------------------------------------- the histogram

#define SUB 128            // steps per doubling above LINEAR
#define LINEAR 256         // values below this have a bucket each
#define BUCKETS (LINEAR + 48 * SUB)

typedef struct {
  uint64_t counts[BUCKETS];
  uint64_t total, max;
  double sum;
} histogram;

static int bucket_of(uint64_t v) {
  if (v < LINEAR) return (int)v;
  int e = 63 - __builtin_clzll(v) - 7;  // v >> e is in [128, 256)
  int i = LINEAR + (e - 1) * SUB + (int)((v >> e) - SUB);
  return i < BUCKETS ? i : BUCKETS - 1;
}

/** The highest value a bucket holds (what HdrHistogram reports as a percentile's value). */
static uint64_t bucket_top(int i) {
  if (i < LINEAR) return (uint64_t)i;
  int e = (i - LINEAR) / SUB + 1;
  uint64_t m = (uint64_t)((i - LINEAR) % SUB + SUB);
  return ((m + 1) << e) - 1;
}

static void record(histogram *h, uint64_t v) {
  h->counts[bucket_of(v)]++;
  h->total++;
  h->sum += (double)v;
  if (v > h->max) h->max = v;
}

/** The smallest recorded value (to the bucket) with at least p% of the values at or below it. */
static uint64_t percentile(const histogram *h, double p) {
  if (!h->total) return 0;
  uint64_t want = (uint64_t)((p / 100.0) * (double)h->total + 0.999999);
  if (want < 1) want = 1;
  uint64_t seen = 0;
  for (int i = 0; i < BUCKETS; i++) {
    seen += h->counts[i];
    if (seen >= want) {
      uint64_t top = bucket_top(i);
      return top < h->max ? top : h->max;
    }
  }
  return h->max;
}

static void print_histogram(const char *name, const histogram *h) {
  printf("\"%s\":{\"count\":%llu,\"mean\":%.1f,\"p50\":%llu,\"p90\":%llu,\"p99\":%llu,\"p999\":%llu,\"max\":%llu}", name,
         (unsigned long long)h->total, h->total ? h->sum / (double)h->total : 0.0, (unsigned long long)percentile(h, 50),
         (unsigned long long)percentile(h, 90), (unsigned long long)percentile(h, 99), (unsigned long long)percentile(h, 99.9),
         (unsigned long long)h->max);
}

// ---------------------------------------------------------------- paths

typedef struct {
  const char *text;  // the literal, or the characters to draw from
  size_t len;
  int min, max;      // -1 for a literal
} part;

static part parts[64];
static int nparts;
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void) {  // xorshift64*
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}

static void add_part(const char *spec) {
  if (nparts == 64) { fprintf(stderr, "too many --part\n"); exit(2); }
  part *p = &parts[nparts++];
  if (spec[0] == 's' && spec[1] == ':') {
    p->text = spec + 2;
    p->len = strlen(p->text);
    p->min = p->max = -1;
    return;
  }
  int used = 0;
  if (spec[0] != 'c' || sscanf(spec, "c:%d:%d:%n", &p->min, &p->max, &used) != 2 || !used || p->min < 0 || p->max < p->min || !spec[used]) {
    fprintf(stderr, "bad --part %s (s:<literal> or c:<min>:<max>:<chars>)\n", spec);
    exit(2);
  }
  p->text = spec + used;
  p->len = strlen(p->text);
}

/** Writes one path into out (at most cap bytes); returns its length. */
static size_t expand(char *out, size_t cap) {
  size_t n = 0;
  for (int i = 0; i < nparts; i++) {
    const part *p = &parts[i];
    if (p->min < 0) {
      if (n + p->len >= cap) break;
      memcpy(out + n, p->text, p->len);
      n += p->len;
      continue;
    }
    int reps = p->min + (int)(next_random() % (uint64_t)(p->max - p->min + 1));
    for (int k = 0; k < reps && n + 1 < cap; k++) out[n++] = p->text[next_random() % p->len];
  }
  out[n] = 0;
  return n;
}

// ---------------------------------------------------------------- connections

enum { IDLE, BUSY, CLOSED };

typedef struct {
  int fd, state;
  int listed;              // in the idle stack
  uint64_t due, sent;      // the request's due and send times, ns
  char *buf;
  size_t len, cap;
  char *out;               // unsent bytes of the request
  size_t out_len;
} conn;

static struct sockaddr_in addr;
static int epfd;
static conn *conns;
static int nconns;
static int *idle, nidle;
static char head[8192];    // "Host: ..." and the extra headers, CRLF-terminated
static size_t head_len;

static histogram corrected, uncorrected;
static uint64_t completed, in_window, non2xx, e_connect, e_read, e_write, e_timeout, sent, inflight;
static uint64_t window_end;

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void list_idle(conn *c) {
  if (!c->listed) {
    c->listed = 1;
    idle[nidle++] = (int)(c - conns);
  }
}

static int open_conn(conn *c) {
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    c->state = CLOSED;
    e_connect++;
    return -1;
  }
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(c - conns)};
  epoll_ctl(epfd, EPOLL_CTL_ADD, c->fd, &ev);
  c->state = IDLE;
  c->len = 0;
  list_idle(c);
  return 0;
}

/** Closes a connection (a request on it counts as failed by the caller) and opens it again. */
static void reopen(conn *c) {
  if (c->state == BUSY) inflight--;
  if (c->fd >= 0) close(c->fd);
  c->fd = -1;
  c->state = CLOSED;
  c->out_len = 0;
  open_conn(c);
}

static void want_write(conn *c, int on) {
  struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.u32 = (uint32_t)(c - conns)};
  epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void flush(conn *c) {
  while (c->out_len) {
    ssize_t n = write(c->fd, c->out, c->out_len);
    if (n < 0 && errno == EAGAIN) { want_write(c, 1); return; }
    if (n <= 0) { e_write++; reopen(c); return; }
    c->out += n;
    c->out_len -= (size_t)n;
  }
  want_write(c, 0);
}

static char reqbuf[16384];

static void send_request(conn *c, uint64_t due) {
  char path[4096];
  size_t plen = expand(path, sizeof path);
  int n = snprintf(reqbuf, sizeof reqbuf, "GET %.*s HTTP/1.1\r\n%.*s\r\n", (int)plen, path, (int)head_len, head);
  c->state = BUSY;
  c->due = due;
  c->sent = now_ns();
  c->out = reqbuf;  // one request at a time, so one shared buffer: flush copies it out or keeps it below
  c->out_len = (size_t)n;
  sent++;
  inflight++;
  flush(c);
  if (c->out_len && c->state == BUSY) {  // rare: keep the rest in the connection's own memory
    char *copy = malloc(c->out_len);
    memcpy(copy, c->out, c->out_len);
    c->out = copy;  // leaked on purpose: a short-lived tool, and partial writes of ~200 bytes are rare
  }
}

/** The length of a whole response at the start of c->buf, its status in *status; 0 if not all read yet. */
static size_t whole_response(conn *c, int *status, int *close_after) {
  char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
  if (!end) return 0;
  size_t header_len = (size_t)(end - c->buf) + 4;
  if (c->len < 12 || sscanf(c->buf, "HTTP/1.%*d %d", status) != 1) return (size_t)-1;
  long content_length = -1;
  int chunked = 0;
  *close_after = 0;
  for (char *line = (char *)memchr(c->buf, '\n', header_len) + 1; line < end;) {
    char *eol = memchr(line, '\n', (size_t)(end - line) + 2);
    size_t l = (size_t)(eol - line);
    if (!strncasecmp(line, "content-length:", 15)) content_length = strtol(line + 15, NULL, 10);
    else if (!strncasecmp(line, "transfer-encoding:", 18) && memmem(line, l, "chunked", 7)) chunked = 1;
    else if (!strncasecmp(line, "connection:", 11) && memmem(line, l, "close", 5)) *close_after = 1;
    line = eol + 1;
  }
  if (!chunked) {
    if (content_length < 0) content_length = 0;  // a keep-alive answer without either has no body
    return c->len >= header_len + (size_t)content_length ? header_len + (size_t)content_length : 0;
  }
  size_t at = header_len;
  for (;;) {  // chunks: hex size CRLF data CRLF ... 0 CRLF (trailers) CRLF
    char *eol = memmem(c->buf + at, c->len - at, "\r\n", 2);
    if (!eol) return 0;
    size_t size = strtoul(c->buf + at, NULL, 16);
    at = (size_t)(eol - c->buf) + 2;
    if (size == 0) {
      char *fin = memmem(c->buf + at - 2, c->len - at + 2, "\r\n\r\n", 4);
      return fin ? (size_t)(fin - c->buf) + 4 : 0;
    }
    if (c->len < at + size + 2) return 0;
    at += size + 2;
  }
}

static void on_readable(conn *c) {
  for (;;) {
    if (c->cap - c->len < 4096) {
      c->cap = c->cap ? c->cap * 2 : 65536;
      c->buf = realloc(c->buf, c->cap);
    }
    ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len - 1);
    if (n < 0 && errno == EAGAIN) break;
    if (n <= 0) {  // closed or reset: a failure only if a request was waiting on it
      if (c->state == BUSY) e_read++;
      reopen(c);
      return;
    }
    c->len += (size_t)n;
    c->buf[c->len] = 0;
  }
  if (c->state != BUSY) { c->len = 0; return; }
  int status = 0, close_after = 0;
  size_t whole = whole_response(c, &status, &close_after);
  if (whole == 0) return;
  if (whole == (size_t)-1) { e_read++; reopen(c); return; }
  uint64_t t = now_ns();
  record(&corrected, (t - c->due) / 1000);
  record(&uncorrected, (t - c->sent) / 1000);
  completed++;
  if (t <= window_end) in_window++;
  if (status < 200 || status > 299) non2xx++;
  memmove(c->buf, c->buf + whole, c->len - whole);
  c->len -= whole;
  inflight--;
  c->state = IDLE;
  if (close_after) { reopen(c); return; }
  list_idle(c);
}

// ---------------------------------------------------------------- the run

static void usage(void) {
  fprintf(stderr, "usage: openloop --host H --port P --rate R --duration S --connections C [--drain S] [--timeout S] [--seed N]\n"
                  "       [--header 'Name: value']... --part s:<literal> | --part c:<min>:<max>:<chars> ...\n"
                  "       openloop --histogram-test | openloop --expand-test N [--seed N] --part ...\n");
  exit(2);
}

int main(int argc, char **argv) {
  const char *host = "127.0.0.1";
  int port = 0, connections = 64;
  double rate = 0, duration = 0, drain = 5, timeout = 5;
  long expand_test = -1;
  int histogram_test = 0;
  head_len = 0;
  char extra[8192] = "";
  size_t extra_len = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--histogram-test")) { histogram_test = 1; continue; }
    if (!v) usage();
    i++;
    if (!strcmp(a, "--host")) host = v;
    else if (!strcmp(a, "--port")) port = atoi(v);
    else if (!strcmp(a, "--rate")) rate = atof(v);
    else if (!strcmp(a, "--duration")) duration = atof(v);
    else if (!strcmp(a, "--connections")) connections = atoi(v);
    else if (!strcmp(a, "--drain")) drain = atof(v);
    else if (!strcmp(a, "--timeout")) timeout = atof(v);
    else if (!strcmp(a, "--seed")) rng = strtoull(v, NULL, 10) * 0x9E3779B97F4A7C15ull + 1;
    else if (!strcmp(a, "--part")) add_part(v);
    else if (!strcmp(a, "--expand-test")) expand_test = atol(v);
    else if (!strcmp(a, "--header")) {
      size_t l = strlen(v);
      if (extra_len + l + 2 >= sizeof extra) usage();
      memcpy(extra + extra_len, v, l);
      memcpy(extra + extra_len + l, "\r\n", 3);
      extra_len += l + 2;
    } else usage();
  }

  if (histogram_test) {
    unsigned long long v;
    while (scanf("%llu", &v) == 1) record(&corrected, v);
    printf("{");
    print_histogram("histogram", &corrected);
    printf("}\n");
    return 0;
  }
  if (expand_test >= 0) {
    char path[4096];
    for (long i = 0; i < expand_test; i++) {
      expand(path, sizeof path);
      puts(path);
    }
    return 0;
  }
  if (!port || rate <= 0 || duration <= 0 || connections < 1 || !nparts) usage();

  head_len = (size_t)snprintf(head, sizeof head, "Host: %s:%d\r\n%s", host, port, extra);
  addr.sin_family = AF_INET;
  addr.sin_port = htons((uint16_t)port);
  if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) { fprintf(stderr, "--host: an IPv4 address\n"); return 2; }

  epfd = epoll_create1(0);
  int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  struct epoll_event tev = {.events = EPOLLIN, .data.u32 = UINT32_MAX};
  epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &tev);
  nconns = connections;
  conns = calloc((size_t)nconns, sizeof *conns);
  idle = calloc((size_t)nconns, sizeof *idle);
  for (int i = 0; i < nconns; i++) {
    conns[i].fd = -1;
    if (open_conn(&conns[i]) < 0) { fprintf(stderr, "connect %s:%d: %s\n", host, port, strerror(errno)); return 1; }
  }

  const uint64_t total = (uint64_t)(rate * duration + 0.5);
  const double period = 1e9 / rate;
  const uint64_t start = now_ns() + 1000000;  // 1 ms from now
  window_end = start + (uint64_t)(duration * 1e9);
  const uint64_t give_up = window_end + (uint64_t)(drain * 1e9);
  const uint64_t timeout_ns = (uint64_t)(timeout * 1e9);
  uint64_t dispatched = 0, backlog_max = 0, last_sweep = start;
  struct epoll_event events[256];

  for (;;) {
    uint64_t now = now_ns();
    uint64_t due_now = now < start ? 0 : (uint64_t)((double)(now - start) / period) + 1;
    if (due_now > total) due_now = total;
    while (dispatched < due_now && nidle) {
      conn *c = &conns[idle[--nidle]];
      c->listed = 0;
      if (c->state != IDLE) continue;
      send_request(c, start + (uint64_t)((double)dispatched * period));
      dispatched++;
    }
    if (due_now - dispatched > backlog_max) backlog_max = due_now - dispatched;
    if (dispatched == total && inflight == 0) break;
    if (now > give_up) break;
    if (now - last_sweep > 10000000) {  // every 10 ms: requests waiting longer than --timeout fail
      last_sweep = now;
      for (int i = 0; i < nconns; i++)
        if (conns[i].state == BUSY && conns[i].sent + timeout_ns < now) { e_timeout++; reopen(&conns[i]); }
      for (int i = 0; i < nconns; i++)  // a connection that could not open is tried again
        if (conns[i].state == CLOSED) open_conn(&conns[i]);
    }
    if (due_now < total && dispatched == due_now) {  // wake at the next due time
      uint64_t next = start + (uint64_t)((double)due_now * period);
      struct itimerspec its = {.it_value = {.tv_sec = (time_t)(next / 1000000000ull), .tv_nsec = (long)(next % 1000000000ull)}};
      timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    }
    int n = epoll_wait(epfd, events, 256, 10);
    for (int i = 0; i < n; i++) {
      if (events[i].data.u32 == UINT32_MAX) {
        uint64_t ticks;
        if (read(tfd, &ticks, sizeof ticks) < 0) { /* nothing due yet */ }
        continue;
      }
      conn *c = &conns[events[i].data.u32];
      if (c->fd < 0) continue;
      if (events[i].events & EPOLLOUT) flush(c);
      if (c->fd >= 0 && events[i].events & (EPOLLIN | EPOLLERR | EPOLLHUP)) on_readable(c);
    }
  }

  uint64_t finished = now_ns();
  struct rusage self;
  getrusage(RUSAGE_SELF, &self);
  double cpu_s = (double)self.ru_utime.tv_sec + (double)self.ru_stime.tv_sec + (double)(self.ru_utime.tv_usec + self.ru_stime.tv_usec) / 1e6;
  uint64_t unfinished = total - completed - e_read - e_write - e_timeout;
  if (unfinished > total) unfinished = 0;  // errors on connections that had no request
  printf("{\"rate\":%.3f,\"duration_s\":%.3f,\"connections\":%d,\"scheduled\":%llu,\"sent\":%llu,\"completed\":%llu,"
         "\"completed_in_window\":%llu,\"served_rps\":%.1f,\"non2xx\":%llu,\"errors\":{\"connect\":%llu,\"read\":%llu,"
         "\"write\":%llu,\"timeout\":%llu},\"unfinished\":%llu,\"backlog_max\":%llu,\"wall_s\":%.3f,\"cpu_s\":%.3f,",
         rate, duration, connections, (unsigned long long)total, (unsigned long long)sent, (unsigned long long)completed,
         (unsigned long long)in_window, (double)in_window / duration, (unsigned long long)non2xx, (unsigned long long)e_connect,
         (unsigned long long)e_read, (unsigned long long)e_write, (unsigned long long)e_timeout, (unsigned long long)unfinished,
         (unsigned long long)backlog_max, (double)(finished - start) / 1e9, cpu_s);
  print_histogram("latency_us", &corrected);
  printf(",");
  print_histogram("uncorrected_us", &uncorrected);
  printf("}\n");
  return 0;
}
