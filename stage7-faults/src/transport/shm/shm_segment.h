/*
 * transport/shm/shm_segment.h: shared memory that leaks nothing, and how a peer gets it.
 *
 * What it is: the two system-level pieces of the SHM transport.
 *
 *  - A segment is an anonymous memory file (memfd_create) mapped MAP_SHARED. It has no name
 *    in /dev/shm or anywhere else: it lives exactly as long as some process maps it (or holds
 *    its descriptor), so a rank that crashes, even mid-collective, leaves nothing behind. Its
 *    pages are reserved when it is made (fallocate), so a shortage of memory is an error that
 *    names the size at connection time, not a SIGBUS in the middle of a collective.
 *    (NCCL uses named files in /dev/shm, unlinked once both peers have them open, and fails
 *    in containers whose /dev/shm is small -- Docker's default is 64 MiB. A memfd does not
 *    live in /dev/shm, so that limit does not apply.)
 *  - A descriptor travels to the peer over a Unix socket in the abstract namespace (a name
 *    that starts with a NUL byte: no file is created, nothing is left to clean up), as
 *    SCM_RIGHTS ancillary data: the kernel installs a copy of the descriptor in the receiving
 *    process. The receiver listens; the sender connects and sends in one go, which completes
 *    in the listener's backlog, so the sender never waits for the receiver to accept.
 *
 * Invariants: a listener accepts one connection and is closed after it; a received descriptor
 * is accepted only with the hello the caller expects (the communicator's secret: anyone on
 * the host can connect to an abstract socket); every descriptor is closed once mapped.
 *
 * NCCL counterpart: src/misc/shmutils.cc (ncclShmOpen), src/misc/ipcsocket.cc (ncclIpcSocket:
 * the same abstract-socket + SCM_RIGHTS scheme NCCL uses for cuMem file descriptors).
 * Added in: stage 5.
 */
#ifndef TCCL_TRANSPORT_SHM_SHM_SEGMENT_H_
#define TCCL_TRANSPORT_SHM_SHM_SEGMENT_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "core.h"

namespace tccl {

/// A mapped segment of shared memory.
struct ShmSegment {
  void* base = nullptr;
  size_t bytes = 0;
  int fd = -1;  // open until the peer has it (create) or until mapped (map)
};

/// Creates a zeroed segment of `bytes` (pages reserved) and maps it. `what` names it in
/// errors and in /proc/<pid>/maps ("memfd:<what>").
tcclResult_t shmCreate(size_t bytes, const char* what, ShmSegment* out);
/// Maps a segment whose descriptor came from a peer; closes the descriptor.
tcclResult_t shmMapFd(int fd, size_t bytes, ShmSegment* out);
/// Unmaps (and closes the descriptor if still open). Safe on an empty segment.
void shmUnmap(ShmSegment* seg);

/// Abstract socket names: 1 NUL byte + up to 62 characters.
struct FdSocketName {
  char bytes[64];
};

/// The listening side: one connection, one descriptor.
struct FdListener {
  int fd = -1;
  FdSocketName name{};
};

/// Creates a listener with a fresh, unguessable name.
tcclResult_t fdListen(FdListener* out);
/// Connects to `name` and sends `fdToSend` with `hello` (helloBytes) as the message body.
/// *peerPid: the listening process, as the kernel names it in our pid namespace.
tcclResult_t fdSend(const FdSocketName& name, int fdToSend, const void* hello, size_t helloBytes,
                    pid_t* peerPid);
/// Accepts the one connection (waiting at most timeoutMs) and receives a descriptor and a
/// hello of exactly helloBytes into *fdOut / hello. The caller checks the hello. *peerPid: the
/// sending process (as for fdSend).
tcclResult_t fdAccept(FdListener* l, int timeoutMs, int* fdOut, void* hello, size_t helloBytes,
                      pid_t* peerPid);
void fdClose(FdListener* l);

}  // namespace tccl

#endif  // TCCL_TRANSPORT_SHM_SHM_SEGMENT_H_
