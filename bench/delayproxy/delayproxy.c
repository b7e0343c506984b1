// A TCP proxy that holds every chunk it reads for a fixed time before passing it on: a database
// "0.5 ms away" in userspace, where the seeds used tc netem on a veth (this machine's kernel has no
// netem module, and no modules to load). Each chunk read from one side is written to the other once
// its delay has passed, in order; one thread, epoll, one timerfd. Since every chunk going one way waits
// the same time, one FIFO per direction is in release order, and the timer follows the earlier head.
//
//   delayproxy --target 127.0.0.1:5432 [--listen 127.0.0.1:0] [--to-us 500] [--back-us 0]
//
// --to-us delays what clients send to the target, --back-us what the target answers. Prints
// "listening on <host>:<port>" once it accepts, and on SIGTERM how late it released the chunks (a
// busy machine wakes it late, which adds to the delay). Unlike netem it adds no delay per packet: a chunk is
// what one read() returned, so bytes that arrive together are released together; and a close on
// either side closes both once its delay has passed (no half-closed connections: PostgreSQL needs none).
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

typedef struct chunk {
  struct chunk *next;
  uint64_t release;  // ns, CLOCK_MONOTONIC
  int pair, dir;     // dir 0: client -> target, 1: target -> client
  size_t len;        // 0: the source closed; close the pair once what came before is written
  char data[];
} chunk;

typedef struct {
  int fd[2];                 // [0] the client, [1] the target
  char *pending[2];          // bytes released but not yet written to fd[dir] (the destination of direction dir^1)
  size_t pending_len[2];
  int closing, closed;
} pair;

static chunk *head[2], *tail[2];
static pair *pairs;
static int npairs, cap_pairs;
static int epfd, tfd, lfd;
static uint64_t delay_ns[2];
static struct sockaddr_in target;
static uint64_t released, late_sum_ns, late_max_ns, late_over_100us;  // how far past its time each chunk went out
static volatile sig_atomic_t stopping;

static void on_term(int sig) {
  (void)sig;
  stopping = 1;
}

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int parse_addr(const char *s, struct sockaddr_in *a) {
  char host[64];
  const char *colon = strrchr(s, ':');
  if (!colon || colon - s >= (long)sizeof host) return -1;
  memcpy(host, s, (size_t)(colon - s));
  host[colon - s] = 0;
  a->sin_family = AF_INET;
  a->sin_port = htons((uint16_t)atoi(colon + 1));
  return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
}

static void watch(int fd, uint32_t id, uint32_t events, int op) {
  struct epoll_event ev = {.events = events, .data.u32 = id};
  epoll_ctl(epfd, op, fd, &ev);
}

static void close_pair(int p) {
  pair *x = &pairs[p];
  if (x->closed) return;
  x->closed = 1;
  for (int s = 0; s < 2; s++) {
    close(x->fd[s]);
    free(x->pending[s]);
    x->pending[s] = NULL;
  }
}

static void arm(void) {
  uint64_t next = UINT64_MAX;
  for (int d = 0; d < 2; d++)
    if (head[d] && head[d]->release < next) next = head[d]->release;
  struct itimerspec its = {0};
  if (next != UINT64_MAX) {
    its.it_value.tv_sec = (time_t)(next / 1000000000ull);
    its.it_value.tv_nsec = (long)(next % 1000000000ull);
    if (!its.it_value.tv_sec && !its.it_value.tv_nsec) its.it_value.tv_nsec = 1;
  }
  timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/** Writes what is pending towards side s of pair p; watches for room when the socket is full. */
static void flush(int p, int s) {
  pair *x = &pairs[p];
  while (x->pending_len[s]) {
    ssize_t n = write(x->fd[s], x->pending[s], x->pending_len[s]);
    if (n < 0 && errno == EAGAIN) {
      watch(x->fd[s], (uint32_t)(p * 2 + s), EPOLLIN | EPOLLOUT, EPOLL_CTL_MOD);
      return;
    }
    if (n <= 0) { close_pair(p); return; }
    memmove(x->pending[s], x->pending[s] + n, x->pending_len[s] - (size_t)n);
    x->pending_len[s] -= (size_t)n;
  }
  watch(x->fd[s], (uint32_t)(p * 2 + s), EPOLLIN, EPOLL_CTL_MOD);
  if (x->closing && !x->pending_len[0] && !x->pending_len[1]) close_pair(p);
}

static void release_due(void) {
  uint64_t now = now_ns();
  for (int d = 0; d < 2; d++) {
    while (head[d] && head[d]->release <= now) {
      chunk *c = head[d];
      uint64_t late = now - c->release;
      released++;
      late_sum_ns += late;
      if (late > late_max_ns) late_max_ns = late;
      if (late > 100000) late_over_100us++;
      head[d] = c->next;
      if (!head[d]) tail[d] = NULL;
      pair *x = &pairs[c->pair];
      int to = c->dir ^ 1;  // direction 0 goes to the target (side 1)
      if (!x->closed) {
        if (!c->len) {
          x->closing = 1;
          if (!x->pending_len[0] && !x->pending_len[1]) close_pair(c->pair);
        } else {
          x->pending[to] = realloc(x->pending[to], x->pending_len[to] + c->len);
          memcpy(x->pending[to] + x->pending_len[to], c->data, c->len);
          x->pending_len[to] += c->len;
          flush(c->pair, to);
        }
      }
      free(c);
    }
  }
  arm();
}

static void enqueue(int p, int dir, const char *data, size_t len) {
  chunk *c = malloc(sizeof *c + len);
  c->next = NULL;
  c->release = now_ns() + delay_ns[dir];
  c->pair = p;
  c->dir = dir;
  c->len = len;
  memcpy(c->data, data, len);
  if (tail[dir]) tail[dir]->next = c;
  else head[dir] = c;
  tail[dir] = c;
  if (head[dir] == c) arm();
}

static void accept_one(void) {
  int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
  if (cfd < 0) return;
  int tfd_ = socket(AF_INET, SOCK_STREAM, 0);
  if (tfd_ < 0 || connect(tfd_, (struct sockaddr *)&target, sizeof target) < 0) {
    close(cfd);
    if (tfd_ >= 0) close(tfd_);
    return;
  }
  fcntl(tfd_, F_SETFL, fcntl(tfd_, F_GETFL) | O_NONBLOCK);
  int one = 1;
  setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(tfd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (npairs == cap_pairs) {
    cap_pairs = cap_pairs ? cap_pairs * 2 : 256;
    pairs = realloc(pairs, (size_t)cap_pairs * sizeof *pairs);
  }
  int p = npairs++;  // pairs are never reused: chunks still queued for a closed one are dropped
  memset(&pairs[p], 0, sizeof pairs[p]);
  pairs[p].fd[0] = cfd;
  pairs[p].fd[1] = tfd_;
  watch(cfd, (uint32_t)(p * 2), EPOLLIN, EPOLL_CTL_ADD);
  watch(tfd_, (uint32_t)(p * 2 + 1), EPOLLIN, EPOLL_CTL_ADD);
}

static char buf[1 << 16];

static void readable(int p, int s) {
  pair *x = &pairs[p];
  for (;;) {
    ssize_t n = read(x->fd[s], buf, sizeof buf);
    if (n < 0 && errno == EAGAIN) return;
    if (n <= 0) {  // closed or failed: the other side hears of it after the same delay
      enqueue(p, s, NULL, 0);
      epoll_ctl(epfd, EPOLL_CTL_DEL, x->fd[s], NULL);
      return;
    }
    enqueue(p, s, buf, (size_t)n);  // side 0 (client) reads go direction 0, side 1 reads direction 1
  }
}

int main(int argc, char **argv) {
  const char *listen_at = "127.0.0.1:0", *target_at = NULL;
  double to_us = 500, back_us = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--listen")) listen_at = argv[i + 1];
    else if (!strcmp(argv[i], "--target")) target_at = argv[i + 1];
    else if (!strcmp(argv[i], "--to-us")) to_us = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--back-us")) back_us = atof(argv[i + 1]);
    else target_at = NULL, i = argc;
  }
  struct sockaddr_in la;
  if (!target_at || parse_addr(target_at, &target) || parse_addr(listen_at, &la) || (argc - 1) % 2) {
    fprintf(stderr, "usage: delayproxy --target 127.0.0.1:5432 [--listen 127.0.0.1:0] [--to-us 500] [--back-us 0]\n");
    return 2;
  }
  delay_ns[0] = (uint64_t)(to_us * 1000);
  delay_ns[1] = (uint64_t)(back_us * 1000);
  lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  int one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(lfd, (struct sockaddr *)&la, sizeof la) < 0 || listen(lfd, 1024) < 0) { perror("listen"); return 1; }
  socklen_t len = sizeof la;
  getsockname(lfd, (struct sockaddr *)&la, &len);
  char host[64];
  inet_ntop(AF_INET, &la.sin_addr, host, sizeof host);
  printf("listening on %s:%d\n", host, ntohs(la.sin_port));
  fflush(stdout);

  epfd = epoll_create1(0);
  tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  watch(lfd, UINT32_MAX, EPOLLIN, EPOLL_CTL_ADD);
  watch(tfd, UINT32_MAX - 1, EPOLLIN, EPOLL_CTL_ADD);
  struct sigaction sa = {.sa_handler = on_term};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  struct epoll_event events[256];
  while (!stopping) {
    int n = epoll_wait(epfd, events, 256, -1);
    for (int i = 0; i < n; i++) {
      uint32_t id = events[i].data.u32;
      if (id == UINT32_MAX) accept_one();
      else if (id == UINT32_MAX - 1) {
        uint64_t ticks;
        if (read(tfd, &ticks, sizeof ticks) < 0) { /* not due yet */ }
        release_due();
      } else {
        int p = (int)(id / 2), s = (int)(id % 2);
        if (pairs[p].closed) continue;
        if (events[i].events & EPOLLOUT) flush(p, s);
        if (!pairs[p].closed && events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readable(p, s);
      }
    }
    release_due();  // a chunk with no delay (--back-us 0) goes at once
  }
  printf("{\"chunks\":%llu,\"late_mean_us\":%.1f,\"late_max_us\":%.1f,\"late_over_100us\":%llu}\n", (unsigned long long)released,
         released ? (double)late_sum_ns / (double)released / 1000 : 0.0, (double)late_max_ns / 1000, (unsigned long long)late_over_100us);
  return 0;
}
