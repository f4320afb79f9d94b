/*
 * common/src/trace.cc: the recorder and the Chrome trace-event writer. See trace.h.
 *
 * What it is: a ring of TraceEvents behind one mutex, a table of event names (each with its
 * category and argument labels), a table of string arguments, the names of lanes and ranks,
 * and a writer that turns them into {"traceEvents": [...], "otherData": {...}}.
 *
 * Invariants: events are kept in arrival order; when the ring is full the oldest is
 * overwritten and `dropped_` counts it; the writer never holds the mutex while it does file
 * I/O on more than a copy of the state (recording threads are not blocked by a slow disk).
 *
 * Added in: stage 1 (observability).
 */
#include "tccl/common/trace.h"

#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "tccl/common/debug.h"
#include "tccl/common/param.h"
#include "tccl/common/socket.h"  // getHostName

namespace tccl {
namespace {

struct NameInfo {
  std::string name, category;
  std::vector<std::string> labels;
};

/// What one write of the file needs, copied out of the recorder under its mutex.
struct Snapshot {
  std::vector<TraceEvent> events;  // oldest first
  uint64_t dropped = 0;
  std::vector<NameInfo> names;
  std::vector<std::string> strings;
  std::map<std::pair<int, int>, std::string> tracks;
  std::vector<TraceRank> ranks;
};

void writeTrace(FILE* f, const Snapshot& s);

class Recorder {
 public:
  static Recorder& get() {
    // Leaked on purpose: the atexit flush and late CUDA callbacks may still record after
    // static destructors would have run.
    static Recorder* r = new Recorder();
    return *r;
  }

  bool enabled() const { return enabled_; }

  uint16_t name(const char* name, const char* category,
                std::initializer_list<const char*> labels) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < names_.size(); i++) {
      if (names_[i].name == name) return uint16_t(i);
    }
    NameInfo n{name, category, {}};
    for (const char* l : labels) n.labels.push_back(l);
    names_.push_back(std::move(n));
    return uint16_t(names_.size() - 1);
  }

  int64_t string(const char* s) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < strings_.size(); i++) {
      if (strings_[i] == s) return int64_t(i);
    }
    strings_.push_back(s);
    return int64_t(strings_.size() - 1);
  }

  void track(int pid, int tid, const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex_);
    tracks_.emplace(std::make_pair(pid, tid), name);  // emplace: the first name wins
  }

  void rank(const TraceRank& r) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& have : ranks_) {
      if (have.pid == r.pid) {
        have = r;
        return;
      }
    }
    ranks_.push_back(r);
  }

  int pid(uint64_t commHash, int rank) {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t k = 0;
    while (k < comms_.size() && comms_[k] != commHash) k++;
    if (k == comms_.size()) comms_.push_back(commHash);
    return int(1000 * k) + rank;
  }

  void record(const TraceEvent& e) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (ring_.size() < cap_) {
      ring_.push_back(e);
    } else {
      ring_[next_ % cap_] = e;  // full: overwrite the oldest
      dropped_++;
    }
    next_++;
    dirty_ = true;
  }

  void countDropped(uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    dropped_ += n;
  }

  void flush();

 private:
  Recorder() {
    path_ = getEnvString("TCCL_TRACE_FILE");
    enabled_ = !path_.empty();
    if (!enabled_) return;
    const int64_t cap = readIntParam("TCCL_TRACE_EVENTS", 262144);
    cap_ = size_t(cap > 0 ? cap : 1);
    ring_.reserve(cap_ < 65536 ? cap_ : 65536);  // grows up to cap_ as events arrive
    // Normal exit writes what arrived after the last tcclCommDestroy (or without one).
    atexit([] { Recorder::get().flushIfDirty(); });
  }

  void flushIfDirty() {
    bool dirty;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dirty = dirty_;
    }
    if (dirty) flush();
  }


  std::mutex mutex_;  // guards everything below
  bool enabled_ = false;
  std::string path_;
  size_t cap_ = 0;
  std::vector<TraceEvent> ring_;
  uint64_t next_ = 0;     // events recorded so far (ring_ index of the next one: next_ % cap_)
  uint64_t dropped_ = 0;  // overwritten before they were written out
  bool dirty_ = false;    // recorded since the last flush
  std::vector<NameInfo> names_;
  std::vector<std::string> strings_;
  std::map<std::pair<int, int>, std::string> tracks_;
  std::vector<TraceRank> ranks_;
  std::vector<uint64_t> comms_;
};

/// Writes `s` as a JSON string.
void jsonString(FILE* f, const std::string& s) {
  fputc('"', f);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      fputc('\\', f);
      fputc(c, f);
    } else if (c < 0x20) {
      fprintf(f, "\\u%04x", c);
    } else {
      fputc(c, f);
    }
  }
  fputc('"', f);
}

/// Nanoseconds as microseconds with three decimals, exactly (no double rounding).
void jsonMicros(FILE* f, uint64_t ns) {
  fprintf(f, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

void Recorder::flush() {
  // Copy under the lock, write without it: recording threads never wait for the disk.
  Snapshot snap;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!enabled_) return;
    snap.events.reserve(ring_.size());
    if (ring_.size() < cap_) {
      snap.events = ring_;
    } else {  // oldest first: the slot after the last one written
      for (size_t i = 0; i < cap_; i++) snap.events.push_back(ring_[(next_ + i) % cap_]);
    }
    snap.dropped = dropped_;
    snap.names = names_;
    snap.strings = strings_;
    snap.tracks = tracks_;
    snap.ranks = ranks_;
    dirty_ = false;
  }
  const std::string name = expandFileName(path_.c_str());
  FILE* f = fopen(name.c_str(), "w");
  if (f == nullptr) {
    TCCL_WARN("cannot write the trace file %s (TCCL_TRACE_FILE): %s", name.c_str(),
              strerror(errno));
    return;
  }
  writeTrace(f, snap);
  if (fclose(f) != 0) {
    TCCL_WARN("writing the trace file %s failed: %s", name.c_str(), strerror(errno));
  } else {
    TCCL_INFO(kInit, "trace: %zu events written to %s (%" PRIu64 " dropped)",
              snap.events.size(), name.c_str(), snap.dropped);
  }
}

void writeTrace(FILE* f, const Snapshot& s) {
  fputs("{\"traceEvents\":[\n", f);
  bool first = true;
  auto sep = [&] {
    if (!first) fputs(",\n", f);
    first = false;
  };
  for (const TraceRank& r : s.ranks) {
    sep();
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}}",
            r.pid, r.rank);
    sep();
    fprintf(f, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"args\":{\"sort_index\":%d}}",
            r.pid, r.pid);
  }
  for (const auto& [key, name] : s.tracks) {
    sep();
    fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":",
            key.first, key.second);
    jsonString(f, name);
    fputs("}}", f);
    sep();
    fprintf(f, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"sort_index\":%d}}", key.first, key.second, key.second);
  }
  for (const TraceEvent& e : s.events) {
    if (e.name >= s.names.size()) continue;
    const NameInfo& n = s.names[e.name];
    sep();
    fputs("{\"ph\":\"X\",\"cat\":", f);
    jsonString(f, n.category);
    fputs(",\"name\":", f);
    jsonString(f, n.name);
    fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":", e.pid, e.tid);
    jsonMicros(f, e.t0);
    fputs(",\"dur\":", f);
    jsonMicros(f, e.t1 > e.t0 ? e.t1 - e.t0 : 0);
    fputs(",\"args\":{", f);
    bool firstArg = true;
    for (size_t i = 0; i < n.labels.size() && i < size_t(kTraceArgs); i++) {
      if (e.args[i] == kTraceNoArg) continue;
      if (!firstArg) fputc(',', f);
      firstArg = false;
      const std::string& label = n.labels[i];
      if (label[0] == '$') {
        jsonString(f, label.substr(1));
        fputc(':', f);
        const size_t id = size_t(e.args[i]);
        jsonString(f, id < s.strings.size() ? s.strings[id] : "?");
      } else {
        jsonString(f, label);
        fprintf(f, ":%" PRId64, e.args[i]);
      }
    }
    fputs("}}", f);
  }
  fputs("\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"tccl\":{\"version\":1,\"host\":", f);
  jsonString(f, getHostName());
  fprintf(f, ",\"pid\":%d,\"clock\":\"CLOCK_MONOTONIC\",\"events\":%zu,\"droppedEvents\":%" PRIu64
             ",\"ranks\":[", int(getpid()), s.events.size(), s.dropped);
  for (size_t i = 0; i < s.ranks.size(); i++) {
    const TraceRank& r = s.ranks[i];
    fprintf(f, "%s{\"pid\":%d,\"rank\":%d,\"nranks\":%d,\"comm\":\"0x%" PRIx64
               "\",\"hostHash\":\"0x%" PRIx64
               "\",\"clockOffsetUs\":%.3f,\"clockErrUs\":%.3f,\"clockPings\":%d}",
            i ? "," : "", r.pid, r.rank, r.nranks, r.commHash, r.hostHash, r.clockOffsetUs,
            r.clockErrUs, r.clockPings);
  }
  fputs("]}}}\n", f);
}

}  // namespace

bool traceEnabled() { return Recorder::get().enabled(); }

uint16_t traceName(const char* name, const char* category,
                   std::initializer_list<const char*> argLabels) {
  return Recorder::get().name(name, category, argLabels);
}

int64_t traceString(const char* s) { return Recorder::get().string(s); }

void traceTrack(int pid, int tid, const std::string& name) {
  if (traceEnabled()) Recorder::get().track(pid, tid, name);
}

void traceRank(const TraceRank& r) {
  if (traceEnabled()) Recorder::get().rank(r);
}

int tracePid(uint64_t commHash, int rank) { return Recorder::get().pid(commHash, rank); }

void traceRecord(const TraceEvent& e) {
  if (traceEnabled()) Recorder::get().record(e);
}

void traceCountDropped(uint64_t n) {
  if (traceEnabled() && n > 0) Recorder::get().countDropped(n);
}

void traceFlush() {
  if (traceEnabled()) Recorder::get().flush();
}

}  // namespace tccl
