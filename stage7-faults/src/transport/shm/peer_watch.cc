/*
 * transport/shm/peer_watch.cc: noticing that a peer process on this host has died
 * (peer_watch.h).
 *
 * NCCL counterpart: none.
 * Added in: stage 5; stage 7 fails the whole communicator.
 */
#include "transport/shm/peer_watch.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>

#include "comm_context.h"
#include "core.h"

namespace tccl {

PeerWatch::~PeerWatch() {
  for (Peer& p : peers_) {
    if (p.pidfd >= 0) close(p.pidfd);
  }
}

void PeerWatch::watch(int rank, pid_t pid, ConnFifo* fifo) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Peer& p : peers_) {
    if (p.pid == pid) {
      p.fifos.push_back(fifo);
      return;
    }
  }
#ifdef SYS_pidfd_open
  // A pidfd refers to this process, not to whatever later reuses its pid.
  int fd = int(syscall(SYS_pidfd_open, pid, 0));
#else
  int fd = -1;
#endif
  peers_.push_back(Peer{rank, pid, fd, false, {fifo}});
}

void PeerWatch::check() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Peer& p : peers_) {
    if (p.dead) continue;
    bool gone;
    if (p.pidfd >= 0) {
      pollfd q{p.pidfd, POLLIN, 0};
      gone = poll(&q, 1, 0) == 1;  // readable: the process has exited
    } else {
      gone = kill(p.pid, 0) != 0 && errno == ESRCH;
    }
    if (!gone) continue;
    p.dead = true;
    // Stage 7: it left, or it died? A peer that destroyed its communicator closed every FIFO
    // we share before it exited (leave(), from commFree); otherwise only we close them, here.
    // Acquire: its counter stores came before its flag.
    bool left = true;
    for (ConnFifo* f : p.fifos) left = left && __atomic_load_n(&f->closed, __ATOMIC_ACQUIRE) != 0;
    if (left) {
      TCCL_INFO(kInit, "rank %d (pid %d) destroyed its communicator and exited", p.rank,
                int(p.pid));
    } else {
      TCCL_WARN("rank %d (pid %d) has exited: closing its %zu shared-memory connection(s)",
                p.rank, int(p.pid), p.fifos.size());
    }
    // What a proxy does when a socket closes: waiters see `closed` and give up. Release: a
    // waiter that sees the flag re-reads the counter once (fifo.h), after our store.
    for (ConnFifo* f : p.fifos) __atomic_store_n(&f->closed, 1u, __ATOMIC_RELEASE);
    // Stage 7: a dead rank ends every collective of the communicator, not just the waits on
    // it: the others would otherwise wait out the watchdog for peers that wait on it. A rank
    // that left ends nothing: what it published stays readable (a wait finds its step there,
    // or fails on `closed` for one it never sent). Failing the communicator for it would race
    // with our own reads: a waiter that looked just before the peer's last step and called
    // check() just after the peer's exit would fail an operation whose every byte had come.
    if (comm_ != nullptr && !left) {
      char why[160];
      snprintf(why, sizeof why, "rank %d (pid %d) has exited", p.rank, int(p.pid));
      comm_->setError(tcclRemoteError, why);
    }
  }
}

void PeerWatch::leave() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Release: our last counter stores come before the flag (a waiter that sees it re-reads
  // the counter, fifo.h); the peer's check() reads it with acquire once our process is gone.
  for (Peer& p : peers_) {
    for (ConnFifo* f : p.fifos) __atomic_store_n(&f->closed, 1u, __ATOMIC_RELEASE);
  }
}

}  // namespace tccl
