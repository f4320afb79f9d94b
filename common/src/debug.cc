/*
 * common/src/debug.cc: the logger behind TCCL_WARN / TCCL_INFO / TCCL_TRACE.
 *
 * What it is: one function, log(), that formats a line "host:pid:tid [rank] TCCL LEVEL
 * file:line message" and writes it to stderr or TCCL_DEBUG_FILE when the level and subsystem
 * pass the filters read from the environment:
 *   TCCL_DEBUG=VERSION|WARN|INFO|ABORT|TRACE   (unset: print nothing, like NCCL)
 *   TCCL_DEBUG_SUBSYS=INIT,NET,...|^LIST|ALL    (default INIT,BOOTSTRAP,ENV, like NCCL)
 *   TCCL_DEBUG_FILE=path with %h (host) and %p (pid) expanded
 * ABORT prints like INFO and additionally aborts the process after the first WARN (a core dump
 * at the point of failure), as NCCL_DEBUG=ABORT does.
 *
 * Invariants:
 *  - A WARN always lands in the calling thread's last-error buffer, printed or not, so
 *    tcclGetLastError works with TCCL_DEBUG unset.
 *  - Lines from concurrent threads never interleave: one mutex around the write.
 *  - The filters are read once (lazily) and cached in atomics so logEnabled() is two loads;
 *    resetLogConfig() re-reads them (tests).
 *
 * NCCL counterpart: src/debug.cc (ncclDebugInit, ncclDebugLog).
 * Added in: foundation (common/).
 */
#include "tccl/common/debug.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include "tccl/common/socket.h"  // getHostName

namespace tccl {
namespace {

constexpr size_t kLastErrorBytes = 1024;
constexpr uint64_t kDefaultSubsys = kInit | kBootstrap | kEnv;

// Filters. Written under gMutex by loadConfig(); read lock-free by logEnabled().
std::atomic<bool> gLoaded{false};
std::atomic<int> gLevel{0};
std::atomic<uint64_t> gSubsys{kDefaultSubsys};
std::mutex gMutex;  // guards gFile, loading and every write to it
FILE* gFile = nullptr;
bool gVersionPrinted = false;

thread_local char tLastError[kLastErrorBytes] = "";
thread_local int tLogRank = -1;

struct SubsysName {
  const char* name;
  uint64_t bit;
};
const SubsysName kSubsysNames[] = {
    {"INIT", kInit},   {"COLL", kColl},           {"P2P", kP2p}, {"SHM", kShm},     {"NET", kNet},
    {"GRAPH", kGraph}, {"TUNING", kTuning},       {"ENV", kEnv}, {"ALLOC", kAlloc}, {"CALL", kCall},
    {"PROXY", kProxy}, {"BOOTSTRAP", kBootstrap}, {"IB", kIb},   {"FAULT", kFault}, {"ALL", kAll},
};

int parseLevel(const char* s) {
  if (s == nullptr || *s == '\0') return static_cast<int>(LogLevel::kNone);
  struct {
    const char* name;
    LogLevel level;
  } const names[] = {{"VERSION", LogLevel::kVersion},
                     {"WARN", LogLevel::kWarn},
                     {"INFO", LogLevel::kInfo},
                     {"ABORT", LogLevel::kAbort},
                     {"TRACE", LogLevel::kTrace}};
  for (const auto& n : names)
    if (strcasecmp(s, n.name) == 0) return static_cast<int>(n.level);
  return static_cast<int>(LogLevel::kNone);  // unknown: stay quiet, as NCCL does
}

// "INIT,NET" -> those bits; "^INIT,NET" -> everything but those (NCCL semantics).
uint64_t parseSubsys(const char* s) {
  if (s == nullptr || *s == '\0') return kDefaultSubsys;
  bool invert = false;
  if (*s == '^') {
    invert = true;
    ++s;
  }
  uint64_t mask = 0;
  std::string list(s);
  size_t pos = 0;
  while (pos <= list.size()) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string token = list.substr(pos, comma - pos);
    for (const auto& n : kSubsysNames)
      if (!token.empty() && strcasecmp(token.c_str(), n.name) == 0) mask |= n.bit;
    pos = comma + 1;
  }
  return invert ? ~mask : mask;
}

// Reads the environment. Caller holds gMutex.
void loadConfigLocked() {
  gLevel.store(parseLevel(getenv("TCCL_DEBUG")), std::memory_order_relaxed);
  gSubsys.store(parseSubsys(getenv("TCCL_DEBUG_SUBSYS")), std::memory_order_relaxed);
  if (gFile != nullptr && gFile != stderr) fclose(gFile);
  gFile = stderr;
  const char* path = getenv("TCCL_DEBUG_FILE");
  if (path != nullptr && *path != '\0' && gLevel.load(std::memory_order_relaxed) > 0) {
    std::string name = expandFileName(path);
    FILE* f = fopen(name.c_str(), "w");
    if (f != nullptr) {
      setvbuf(f, nullptr, _IOLBF, 0);  // a crash loses at most the current line
      gFile = f;
    } else {
      fprintf(stderr, "%s:%d TCCL WARN cannot open TCCL_DEBUG_FILE %s (%s); logging to stderr\n",
              getHostName(), getpid(), name.c_str(), strerror(errno));
    }
  }
  // Release: a thread that sees gLoaded also sees the filters stored above.
  gLoaded.store(true, std::memory_order_release);
}

void ensureLoaded() {
  if (gLoaded.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(gMutex);
  if (!gLoaded.load(std::memory_order_relaxed)) loadConfigLocked();
}

const char* baseName(const char* file) {
  const char* slash = strrchr(file, '/');
  return slash != nullptr ? slash + 1 : file;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::kWarn:
      return "WARN";
    case LogLevel::kTrace:
      return "TRACE";
    case LogLevel::kVersion:
      return "VERSION";
    default:
      return "INFO";
  }
}

}  // namespace

std::string expandFileName(const char* pattern) {
  std::string out;
  for (const char* p = pattern; *p != '\0'; ++p) {
    if (p[0] == '%' && p[1] == 'h') {
      out += getHostName();
      ++p;
    } else if (p[0] == '%' && p[1] == 'p') {
      out += std::to_string(getpid());
      ++p;
    } else if (p[0] == '%' && p[1] == '%') {
      out += '%';
      ++p;
    } else {
      out += *p;
    }
  }
  return out;
}

bool logEnabled(LogLevel level, uint64_t subsys) {
  ensureLoaded();
  int configured = gLevel.load(std::memory_order_relaxed);
  if (static_cast<int>(level) > configured || level == LogLevel::kNone) return false;
  // WARN is never filtered by subsystem (NCCL behaves the same).
  if (level == LogLevel::kWarn) return true;
  return (gSubsys.load(std::memory_order_relaxed) & subsys) != 0;
}

void log(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...) {
  bool isWarn = level == LogLevel::kWarn;
  bool print = logEnabled(level, subsys);
  if (!isWarn && !print) return;

  char message[kLastErrorBytes];
  va_list args;
  va_start(args, fmt);
  vsnprintf(message, sizeof(message), fmt, args);
  va_end(args);
  // The last error keeps the message only: it is what tcclGetLastError shows the user.
  if (isWarn) snprintf(tLastError, sizeof(tLastError), "%s", message);
  if (!print) return;

  char rank[16] = "-";
  if (tLogRank >= 0) snprintf(rank, sizeof(rank), "%d", tLogRank);
  long tid = syscall(SYS_gettid);
  bool abortNow = false;
  {
    std::lock_guard<std::mutex> lock(gMutex);
    fprintf(gFile, "%s:%d:%ld [%s] TCCL %s %s:%d %s\n", getHostName(), getpid(), tid, rank,
            levelName(level), baseName(file), line, message);
    fflush(gFile);
    abortNow =
        isWarn && gLevel.load(std::memory_order_relaxed) == static_cast<int>(LogLevel::kAbort);
  }
  if (abortNow) {
    fprintf(stderr, "%s:%d:%ld [%s] TCCL ABORT %s:%d\n", getHostName(), getpid(), tid, rank,
            baseName(file), line);
    abort();
  }
}

void logVersionOnce(const char* text) {
  ensureLoaded();
  if (gLevel.load(std::memory_order_relaxed) < static_cast<int>(LogLevel::kVersion)) return;
  std::lock_guard<std::mutex> lock(gMutex);
  if (gVersionPrinted) return;
  gVersionPrinted = true;
  fprintf(gFile, "%s:%d:%ld [-] TCCL VERSION %s\n", getHostName(), getpid(),
          static_cast<long>(syscall(SYS_gettid)), text);
  fflush(gFile);
}

void setLogRank(int rank) { tLogRank = rank; }
int logRank() { return tLogRank; }

const char* lastError() { return tLastError; }
void clearLastError() { tLastError[0] = '\0'; }

void resetLogConfig() {
  std::lock_guard<std::mutex> lock(gMutex);
  gVersionPrinted = false;
  loadConfigLocked();
}

}  // namespace tccl
