/*
 * flight_recorder.h: the flight recorder -- the last operations of a communicator, kept for
 * the post-mortem.
 *
 * What it is: a ring buffer per communicator with one entry per operation (collective or
 * send/recv): its sequence numbers, what it was (op, count, type, reduction, root or peer),
 * where it got (scheduled, started, completed) and when. Recording is a few stores under a
 * mutex, cheap enough to be always on; the buffer is written out ("dumped") when the watchdog
 * finds an operation that never completes, on SIGUSR1, or when the program calls
 * tcclCommDumpFlightRecorder. Lined up across ranks, the dumps say which rank never joined
 * operation N, or joined it with another op, size, type or root (tools/frtrace).
 *
 * The dump is PyTorch's Flight Recorder JSON (version, pg_config, pg_status, entries with
 * record_id, collective_seq_id, p2p_seq_id, profiling_name "nccl:all_reduce", input/output
 * sizes and dtypes, state, timestamps), so torchfrtrace, the analyzer PyTorch users know,
 * reads it once tools/frtrace has turned it into the pickle torchfrtrace loads (PyTorch
 * dumps pickle by default; its JSON has the same keys); tccl's own fields sit in a "tccl"
 * object per entry.
 *
 * States: every operation is "started" when its call begins (the library is working on it:
 * planning, connecting, and for host buffers moving the data), and "completed" when the call
 * returns -- unless the call launched kernels: then it is "scheduled" (queued on the GPU) and
 * "completed" once the communicator's launch event, recorded after those kernels, has fired
 * (the watchdog looks; executor_gpu.cu counts the launches, so one event tells about them all).
 * An operation whose call returned an error is "completed" with that result in its "tccl"
 * fields; one still running when a dump is written shows "started" or "scheduled".
 *
 * Invariants: record ids grow by one per operation and are never reused (record_id % capacity
 * is the slot); collective_seq_id counts collectives and p2p_seq_id sends and receives, both
 * from 1, in issue order, the same on every rank that made the same calls (a send or receive
 * carries the collective count so far, as PyTorch's do); every method may
 * be called from any thread (the watchdog's, a signal's dump, the caller's).
 *
 * NCCL counterpart: none in NCCL itself (its RAS subsystem answers "who is stuck" live);
 * PyTorch: torch/csrc/distributed/c10d/FlightRecorder.{hpp,cpp} (FlightRecorder::record,
 * retire_id, dump_json) and TORCH_FR_BUFFER_SIZE.
 * Added in: stage 7.
 */
#ifndef TCCL_FLIGHT_RECORDER_H_
#define TCCL_FLIGHT_RECORDER_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core.h"

namespace tccl {

enum class FrState : uint8_t { kScheduled, kStarted, kCompleted };
const char* frStateName(FrState s);  // "scheduled", "started", "completed"

/// One operation, as recorded.
struct FrEntry {
  uint64_t recordId = 0;
  uint64_t collSeq = 0;   // collective_seq_id (0 for send/recv)
  uint64_t p2pSeq = 0;    // p2p_seq_id (0 for collectives)
  uint64_t opCount = 0;   // the communicator's operation number (trace spans use it too)
  const char* name = "";  // "all_reduce", "send": the profiling name is "nccl:" + name
  uint8_t func = 0;       // collectives: the WorkFunc (frCallWords)
  int64_t inCount = 0;    // elements in and out, per this rank's buffers
  int64_t outCount = 0;
  int dtype = 0;          // tcclDataType_t (send/recv: bytes, tcclUint8)
  int redop = -1;         // DevRedOp for reductions (redOpName names it), else -1
  int root = -1;          // broadcast, reduce
  int peer = -1;          // send, recv
  bool onDevice = false;      // its call launched kernels
  uint64_t launch = 0;        // device: the communicator's launch count after its launch
  FrState state = FrState::kScheduled;
  uint64_t createdNs = 0, startedNs = 0, completedNs = 0;  // CLOCK_REALTIME; 0: not yet
  int result = 0;             // tcclResult_t of the call that ran it (host), 0 for success
};

class FlightRecorder {
 public:
  /// `capacity` entries (TCCL_FR_ENTRIES); 0 keeps none (recording still numbers operations).
  explicit FlightRecorder(size_t capacity);
  ~FlightRecorder();
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  /// Records an operation (its seq ids are given here); returns its record id.
  uint64_t record(const FrEntry& e);
  /// The call that ran operations [first, last] returned (host operations, or device ones
  /// whose launch failed): they are completed; or, when the call failed, they keep the state
  /// they reached, with the error in `result` (a failed operation never completed -- what the
  /// other ranks' tools must see -- but its call is over: the watchdog skips it).
  void finish(uint64_t first, uint64_t last, tcclResult_t result);
  /// Operations [first, last] launched kernels; `launch` is the communicator's launch count
  /// after them: they are "scheduled" until pollDevice learns that launch has completed.
  void launched(uint64_t first, uint64_t last, uint64_t launch);
  /// The communicator's launches up to `launch` have completed (its launch event fired):
  /// their operations are completed -- or failed, with `commError`, when the communicator
  /// has failed (its kernels then leave early). The watchdog's call.
  void pollDevice(uint64_t launch, int commError);

  /// The oldest operation not completed, and when the wait for it began: when it started,
  /// or when the operation before it completed, whichever is later (so a queue of device
  /// operations does not count one wait many times). False when all are done.
  bool oldestPending(FrEntry* e, uint64_t* waitingSinceNs) const;
  /// The entries still in the ring, oldest first.
  std::vector<FrEntry> snapshot() const;
  size_t capacity() const { return capacity_; }
  /// Collectives recorded so far: the collective_seq_id of the latest.
  uint64_t collectives() const;
  /// The record id the next operation will get (operations recorded so far).
  uint64_t nextRecordId() const;

  /// PyTorch's Flight Recorder JSON for these entries.
  std::string toJson(int rank, int nranks, const std::string& commName, int64_t timeoutMs) const;

 private:
  mutable std::mutex mu_;
  std::vector<FrEntry> ring_;
  size_t capacity_;
  uint64_t next_ = 0;  // record id of the next entry
  uint64_t collSeq_ = 0, p2pSeq_ = 0;
  uint64_t deviceDone_ = 0;  // launches known complete
};

/// PyTorch's name of a collective: "all_reduce", "all_gather", ... (the dump prepends "nccl:";
/// the watchdog's and the check mode's messages use it as it is).
const char* frCollName(uint8_t workFunc);
/// Whether a collective (a WorkFunc) has a reduction, or a root: what a record or a signature
/// of it keeps besides count and type.
bool frCollReduces(uint8_t workFunc);
bool frCollRooted(uint8_t workFunc);
/// A collective call in words, for messages: "all_reduce of 1000 x float32 (sum)",
/// "broadcast of 10 x int32 (root 0)". `redop` a DevRedOp or -1, `root` -1 for none.
std::string frCallWords(uint8_t workFunc, uint64_t count, int dtype, int redop, int root);

/// Wall-clock nanoseconds (the dumps of different hosts are compared by time).
uint64_t frNowNs();

}  // namespace tccl

#endif  // TCCL_FLIGHT_RECORDER_H_
