/*
 * flight_recorder.cc: the flight recorder's ring and its JSON. See flight_recorder.h.
 *
 * Added in: stage 7.
 */
#include "flight_recorder.h"

#include "group.h"
#include "tccl.h"

#include <time.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace tccl {

namespace {

/// PyTorch's names of the element types (str(torch.float32) without "torch.", as its
/// Flight Recorder writes them).
const char* torchDtypeName(int t) {
  switch (t) {
    case 0: return "Char";      // int8
    case 1: return "Byte";      // uint8
    case 2: return "Int";       // int32
    case 3: return "UInt32";
    case 4: return "Long";      // int64
    case 5: return "UInt64";
    case 6: return "Half";
    case 7: return "Float";
    case 8: return "Double";
    case 9: return "BFloat16";
    default: return "Undefined";
  }
}

const char* redopName(int op) { return op < 0 ? nullptr : redOpName(DevRedOp(op)); }

/// A JSON string (our names need no escaping but the communicator's may).
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}


}  // namespace

const char* frCollName(uint8_t f) {
  switch (WorkFunc(f)) {
    case WorkFunc::kAllReduce: return "all_reduce";
    case WorkFunc::kAllGather: return "all_gather";
    case WorkFunc::kReduceScatter: return "reduce_scatter";
    case WorkFunc::kBroadcast: return "broadcast";
    case WorkFunc::kReduce: return "reduce";
    default: return "unknown";
  }
}

bool frCollReduces(uint8_t f) {
  return WorkFunc(f) != WorkFunc::kAllGather && WorkFunc(f) != WorkFunc::kBroadcast;
}

bool frCollRooted(uint8_t f) {
  return WorkFunc(f) == WorkFunc::kBroadcast || WorkFunc(f) == WorkFunc::kReduce;
}

std::string frCallWords(uint8_t f, uint64_t count, int dtype, int redop, int root) {
  std::string out = std::string(frCollName(f)) + " of " + std::to_string(count) + " x " +
                    dtypeName(tcclDataType_t(dtype));
  if (redop >= 0) out += std::string(" (") + redOpName(DevRedOp(redop)) + ")";
  if (root >= 0) out += " (root " + std::to_string(root) + ")";
  return out;
}

const char* frStateName(FrState s) {
  switch (s) {
    case FrState::kScheduled: return "scheduled";
    case FrState::kStarted: return "started";
    case FrState::kCompleted: return "completed";
  }
  return "?";
}

uint64_t frNowNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

FlightRecorder::FlightRecorder(size_t capacity) : capacity_(capacity) { ring_.resize(capacity); }

FlightRecorder::~FlightRecorder() = default;

uint64_t FlightRecorder::record(const FrEntry& in) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t id = next_++;
  if (capacity_ == 0) {  // numbered, not kept
    (in.peer >= 0 ? p2pSeq_ : collSeq_)++;
    return id;
  }
  // Written in place: one copy of the entry, under the lock.
  FrEntry& e = ring_[id % capacity_];
  e = in;
  e.recordId = id;
  // Sequence ids count every operation, kept or not: ranks compare them. As PyTorch's, a
  // send or receive carries the collective count so far and its own p2p count.
  if (e.peer >= 0) {
    e.collSeq = collSeq_;
    e.p2pSeq = ++p2pSeq_;
  } else {
    e.collSeq = ++collSeq_;
  }
  return id;
}

void FlightRecorder::finish(uint64_t first, uint64_t last, tcclResult_t result) {
  if (capacity_ == 0) return;
  const uint64_t now = frNowNs();
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id = first; id <= last && id < next_; id++) {
    if (next_ - id > capacity_) continue;  // already overwritten
    FrEntry& e = ring_[id % capacity_];
    e.result = int(result);
    // A failed operation never completed: it keeps the state it reached (what the other
    // ranks' dumps and tools/frtrace need to see), and the watchdog skips it (its call is over).
    if (result != tcclSuccess) continue;
    e.state = FrState::kCompleted;
    e.completedNs = now;
  }
}

void FlightRecorder::launched(uint64_t first, uint64_t last, uint64_t launch) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id = first; id <= last && id < next_; id++) {
    if (next_ - id > capacity_) continue;  // already overwritten
    FrEntry& e = ring_[id % capacity_];
    e.onDevice = true;
    e.launch = launch;
    if (launch <= deviceDone_) {  // (the watchdog already saw it complete)
      e.state = FrState::kCompleted;
      e.completedNs = frNowNs();
      continue;
    }
    // Queued on the GPU: when its kernels start is not observed (PyTorch learns it only with
    // a second event, TORCH_NCCL_ENABLE_TIMING); the wait is counted from its creation.
    e.state = FrState::kScheduled;
    e.startedNs = 0;
  }
}

void FlightRecorder::pollDevice(uint64_t launch, int commError) {
  if (capacity_ == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (launch <= deviceDone_) return;
  deviceDone_ = launch;
  const uint64_t now = frNowNs();
  const uint64_t begin = next_ > capacity_ ? next_ - capacity_ : 0;
  for (uint64_t id = begin; id < next_; id++) {
    FrEntry& e = ring_[id % capacity_];
    if (e.onDevice && e.state != FrState::kCompleted && e.result == 0 && e.launch <= launch) {
      // Kernels leave early when the communicator fails: those still pending then failed.
      if (commError != 0) {
        e.result = commError;
        continue;
      }
      e.state = FrState::kCompleted;
      e.completedNs = now;
    }
  }
}

bool FlightRecorder::oldestPending(FrEntry* out, uint64_t* waitingSinceNs) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0) return false;
  const uint64_t begin = next_ > capacity_ ? next_ - capacity_ : 0;
  uint64_t lastDone = 0;
  for (uint64_t id = begin; id < next_; id++) {
    const FrEntry& e = ring_[id % capacity_];
    if (e.state == FrState::kCompleted) {
      lastDone = std::max(lastDone, e.completedNs);
      continue;
    }
    if (e.result != 0) continue;  // failed: its call is over, nothing to wait for
    *out = e;
    const uint64_t began = e.startedNs ? e.startedNs : e.createdNs;
    *waitingSinceNs = std::max(began, lastDone);
    return true;
  }
  return false;
}

std::vector<FrEntry> FlightRecorder::snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<FrEntry> out;
  if (capacity_ == 0) return out;
  const uint64_t begin = next_ > capacity_ ? next_ - capacity_ : 0;
  for (uint64_t id = begin; id < next_; id++) out.push_back(ring_[id % capacity_]);
  return out;
}

uint64_t FlightRecorder::collectives() const {
  std::lock_guard<std::mutex> lock(mu_);
  return collSeq_;
}

uint64_t FlightRecorder::nextRecordId() const {
  std::lock_guard<std::mutex> lock(mu_);
  return next_;
}

std::string FlightRecorder::toJson(int rank, int nranks, const std::string& commName,
                                   int64_t timeoutMs) const {
  // >>> exercise 7.4: the flight recorder's dump
  const std::vector<FrEntry> entries = snapshot();
  // The process group is the communicator: PyTorch's analyzer groups ranks by pg_config.
  std::string ranks = "[";
  for (int r = 0; r < nranks; r++) ranks += (r ? ", " : "") + std::to_string(r);
  ranks += "]";
  const std::string pg = commName.empty() ? "0" : commName;
  uint64_t lastEnq = 0, lastStarted = 0, lastDone = 0;
  for (const FrEntry& e : entries) {
    if (e.peer >= 0 || e.collSeq == 0) continue;
    lastEnq = e.collSeq;
    if (e.state != FrState::kScheduled) lastStarted = e.collSeq;
    if (e.state == FrState::kCompleted) lastDone = e.collSeq;
  }
  std::string j;
  // PyTorch 2.11 writes version "2.10"; its analyzer needs the same version on every rank.
  j += "{\n  \"version\": \"2.10\",\n  \"comm_lib_version\": \"tccl " +
       std::to_string(TCCL_STAGE) + "\",\n";
  j += "  \"rank\": " + std::to_string(rank) + ",\n";
  j += "  \"pg_config\": {" + quoted(pg) + ": {\"name\": " + quoted(pg) +
       ", \"desc\": \"tccl\", \"ranks\": " + quoted(ranks) + "}},\n";
  j += "  \"pg_status\": {" + quoted(pg) + ": {\"last_enqueued_collective\": " +
       std::to_string(lastEnq) + ", \"last_started_collective\": " +
       std::to_string(lastStarted) + ", \"last_completed_collective\": " +
       std::to_string(lastDone) + "}},\n";
  j += "  \"entries\": [";
  for (size_t i = 0; i < entries.size(); i++) {
    const FrEntry& e = entries[i];
    const bool p2p = e.peer >= 0;
    const char* dt = torchDtypeName(e.dtype);
    const char* op = redopName(e.redop);
    // A send is "nccl:send 0->1", a receive "nccl:recv 1<-0" (PyTorch's names, which its
    // analyzer parses for the peers).
    std::string name = std::string("nccl:") + e.name;
    if (p2p) {
      name += " " + std::to_string(rank) + (e.name[0] == 's' ? "->" : "<-") +
              std::to_string(e.peer);
    }
    char head[512];
    snprintf(head, sizeof head,
             "%s\n    {\"record_id\": %" PRIu64 ", \"pg_id\": 0, \"process_group\": [%s, \"tccl\"], "
             "\"thread_name\": \"tccl\", \"thread_id\": \"0\", "
             "\"collective_seq_id\": %" PRIu64 ", \"p2p_seq_id\": %" PRIu64 ", \"op_id\": %" PRIu64
             ", \"profiling_name\": %s, \"is_p2p\": %s, ",
             i ? "," : "", e.recordId, quoted(pg).c_str(), e.collSeq, e.p2pSeq, e.recordId + 1,
             quoted(name).c_str(), p2p ? "true" : "false");
    j += head;
    j += "\"input_sizes\": [[" + std::to_string(e.inCount) + "]], \"input_dtypes\": [\"" + dt +
         "\"], \"output_sizes\": [[" + std::to_string(e.outCount) + "]], \"output_dtypes\": [\"" +
         dt + "\"], ";
    j += std::string("\"state\": \"") + frStateName(e.state) + "\", ";
    j += "\"time_created_ns\": " + std::to_string(e.createdNs) +
         ", \"time_discovered_started_ns\": " + std::to_string(e.startedNs) +  // 0: not yet
         ", \"time_discovered_completed_ns\": " + std::to_string(e.completedNs) +
         ", \"retired\": " +
         (e.state == FrState::kCompleted ? "true" : "false") +
         ", \"timeout_ms\": " + std::to_string(timeoutMs) + ", \"frames\": [], ";
    j += "\"tccl\": {\"op_count\": " + std::to_string(e.opCount) + ", \"root\": " +
         std::to_string(e.root) + ", \"peer\": " + std::to_string(e.peer) + ", \"redop\": " +
         (op ? quoted(op) : std::string("null")) + ", \"on_device\": " +
         (e.onDevice ? "true" : "false") + ", \"result\": " +
         quoted(tcclGetErrorString(tcclResult_t(e.result))) + "}}";
  }
  j += "\n  ]\n}\n";
  return j;
  // <<< exercise 7.4
}

}  // namespace tccl
