/*
 * tests/faults/peer_departure_test.cc: a peer on this host that left, against one that died.
 *
 * What it is: unit tests of PeerWatch's decision (transport/shm/peer_watch.cc), compiled from
 * the stage's sources, with a forked child as the peer and a FIFO in shared memory as SHM's
 * segment. A peer that destroyed its communicator closed the FIFOs it shares before it
 * exited (PeerWatch::leave, from commFree): the survivor's communicator is not failed, since
 * what the peer published is still there to read. A peer that exited without closing them
 * died: the survivor's communicator fails with tcclRemoteError. Without the distinction a
 * waiter that looked at its counter just before the peer's last step and asked check() just
 * after the peer's exit failed an operation whose every byte had come (lab 07 under load, 4
 * ranks on 2 cores): the interleaving these tests pin down without needing the timing.
 *
 * Invariants: no MPI, no sockets, no GPU; the child only leaves (or not) and exits.
 * NCCL counterpart: none (NCCL's SHM transport does not watch its peers).
 * Added in: stage 7.
 */
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <string>

#include "comm_context.h"
#include "device/fifo.h"
#include "transport/shm/peer_watch.h"

// setError names the error in its log line; the library's tcclGetErrorString lives beside
// calls (misc.cc) that would pull in the whole communicator. The tests read asyncError.
extern "C" const char* tcclGetErrorString(tcclResult_t result) {
  return result == tcclSuccess ? "no error" : "an error";
}

namespace tccl {
namespace {

/// A FIFO both processes see, as an SHM segment's.
ConnFifo* sharedFifo() {
  void* mem = mmap(nullptr, sizeof(ConnFifo), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
  return mem == MAP_FAILED ? nullptr : new (mem) ConnFifo();
}

/// Forks a peer that (when `leaves`) leaves as commFree does, then exits; returns once
/// it has, with the survivor's watch registered while it lived.
void runPeer(PeerWatch* watch, ConnFifo* fifo, bool leaves) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (leaves) {  // what commFree does on a destroy: the peer's own watch leaves
      PeerWatch mine;
      mine.watch(0, getppid(), fifo);
      mine.leave();
    }
    _exit(0);
  }
  watch->watch(1, child, fifo);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
}

TEST(PeerDeparture, APeerThatLeftFailsNothing) {
  ConnFifo* fifo = sharedFifo();
  ASSERT_NE(fifo, nullptr);
  CommContext comm;
  PeerWatch watch(&comm);
  runPeer(&watch, fifo, /*leaves=*/true);
  watch.check();
  EXPECT_EQ(comm.asyncError.load(), tcclSuccess) << "a departure must not fail the communicator";
  EXPECT_EQ(loadFlag(&fifo->closed), 1u) << "the connection is closed either way";
  munmap(fifo, sizeof(ConnFifo));
}

TEST(PeerDeparture, APeerThatDiedFailsTheCommunicator) {
  ConnFifo* fifo = sharedFifo();
  ASSERT_NE(fifo, nullptr);
  CommContext comm;
  PeerWatch watch(&comm);
  runPeer(&watch, fifo, /*leaves=*/false);
  watch.check();
  EXPECT_EQ(comm.asyncError.load(), tcclRemoteError);
  EXPECT_NE(comm.errorReason.find("has exited"), std::string::npos) << comm.errorReason;
  EXPECT_EQ(loadFlag(&fifo->closed), 1u) << "waiters on the dead peer are released";
  munmap(fifo, sizeof(ConnFifo));
}

}  // namespace
}  // namespace tccl
