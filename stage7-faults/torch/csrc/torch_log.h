/**
 * torch_log.h: the backend's own log lines (TCCL_TORCH_DEBUG=1), to stderr.
 *
 * What it is: one line per event of an operation's life in the backend, the half of the
 * journey that tccl's own log (TCCL_DEBUG=INFO) cannot see:
 *   tccl_torch host:pid [rank 0] allreduce #12: queued (cpu, 1024 x Float, SUM)
 *   tccl_torch host:pid [rank 0] allreduce #12: done in 41 us (13 us in the queue)
 * Read with TCCL_DEBUG=INFO TCCL_DEBUG_SUBSYS=COLL, the two show a dist.all_reduce from the
 * Python call to the tccl call and back (docs/chapters/stage4-torch.md).
 *
 * Why not common/'s logger: libtccl links common/ statically and exports only the tccl* API,
 * so the extension would need a second copy, and two copies writing TCCL_DEBUG_FILE would
 * truncate each other's file. Warnings that the user must see go through TORCH_WARN instead.
 * Invariants: costs one branch on a cached flag when off; never throws.
 * NCCL counterpart: ProcessGroupNCCL's LOG(INFO) lines under TORCH_DISTRIBUTED_DEBUG=INFO.
 * Added in: stage 4.
 */
#ifndef TCCL_TORCH_TORCH_LOG_H_
#define TCCL_TORCH_TORCH_LOG_H_

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tccl_torch {

inline bool torchLogEnabled() {
  static const bool on = [] {
    const char* v = std::getenv("TCCL_TORCH_DEBUG");
    return v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
  }();
  return on;
}

__attribute__((format(printf, 2, 3))) inline void torchLog(int rank, const char* fmt, ...) {
  if (!torchLogEnabled()) return;
  char host[64] = "?";
  gethostname(host, sizeof(host) - 1);
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  // One fprintf per line: stderr is unbuffered, so a single call keeps lines whole.
  std::fprintf(stderr, "tccl_torch %s:%d [rank %d] %s\n", host, int(getpid()), rank, line);
}

}  // namespace tccl_torch

#endif  // TCCL_TORCH_TORCH_LOG_H_
