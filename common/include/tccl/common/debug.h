/*
 * common/debug.h: logging and the error-propagation macros.
 *
 * What it is: NCCL's debug.h, rebuilt. Every message goes through tccl::log(), which filters by
 * level (TCCL_DEBUG=VERSION|WARN|INFO|TRACE) and subsystem (TCCL_DEBUG_SUBSYS=INIT,NET,...; a
 * leading ^ excludes), and writes one line prefixed "host:pid:tid [rank]" to stderr or to
 * TCCL_DEBUG_FILE (with %h = host name and %p = pid expanded).
 *
 * Invariants: a WARN is also stored as the thread's "last error" (tcclGetLastError shows it),
 * whatever TCCL_DEBUG says; logging never fails and never throws.
 *
 * NCCL counterpart: src/include/debug.h, src/debug.cc (WARN, INFO, TRACE, NCCLCHECK).
 * Added in: foundation (common/).
 */
#ifndef TCCL_COMMON_DEBUG_H_
#define TCCL_COMMON_DEBUG_H_

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "tccl/result.h"

namespace tccl {

enum class LogLevel : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kAbort = 4, kTrace = 5 };

/// Subsystems, as bits, like NCCL's ncclDebugLogSubSys.
enum LogSubsys : uint64_t {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kShm = 1u << 3,
  kNet = 1u << 4,
  kGraph = 1u << 5,
  kTuning = 1u << 6,
  kEnv = 1u << 7,
  kAlloc = 1u << 8,
  kCall = 1u << 9,
  kProxy = 1u << 10,
  kBootstrap = 1u << 11,
  kIb = 1u << 12,
  kFault = 1u << 13,
  kAll = ~uint64_t(0),
};

/// Writes one log line if `level`/`subsys` pass the TCCL_DEBUG filters. printf-style.
void log(LogLevel level, uint64_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

/// True when a message at this level and subsystem would be printed (cheap after the first call).
bool logEnabled(LogLevel level, uint64_t subsys);

/// The rank shown in log prefixes for this thread (-1: none). A communicator sets it on entry
/// to each call and in its worker threads, so several ranks in one process log distinctly.
void setLogRank(int rank);
int logRank();

/// The last WARN message of this thread (tcclGetLastError returns it). Never null.
const char* lastError();
/// Clears the last error of this thread.
void clearLastError();

/// Expands a file-name pattern as TCCL_DEBUG_FILE does (and TCCL_TRACE_FILE): "%h" -> host
/// name, "%p" -> pid, "%%" -> "%".
std::string expandFileName(const char* pattern);

/// Re-reads TCCL_DEBUG* (tests use it after setenv). Not thread-safe against concurrent logging.
void resetLogConfig();

/// Prints `text` once per process as a "TCCL VERSION" line when TCCL_DEBUG is VERSION or more
/// verbose (the banner NCCL prints at init).
void logVersionOnce(const char* text);

}  // namespace tccl

#define TCCL_WARN(...) ::tccl::log(::tccl::LogLevel::kWarn, ::tccl::kAll, __FILE__, __LINE__, __VA_ARGS__)
#define TCCL_INFO(subsys, ...)                                              \
  do {                                                                      \
    if (::tccl::logEnabled(::tccl::LogLevel::kInfo, (subsys)))              \
      ::tccl::log(::tccl::LogLevel::kInfo, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)
#define TCCL_TRACE(subsys, ...)                                             \
  do {                                                                      \
    if (::tccl::logEnabled(::tccl::LogLevel::kTrace, (subsys)))             \
      ::tccl::log(::tccl::LogLevel::kTrace, (subsys), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

/// Propagates a non-success result, logging where it passed (NCCL's NCCLCHECK).
#define TCCL_CHECK(call)                                                               \
  do {                                                                                 \
    tcclResult_t tccl_res_ = (call);                                                   \
    if (tccl_res_ != tcclSuccess) {                                                    \
      TCCL_INFO(::tccl::kAll, "%s:%d -> %d", __FILE__, __LINE__, (int)tccl_res_);      \
      return tccl_res_;                                                                \
    }                                                                                  \
  } while (0)

/// Like TCCL_CHECK, but jumps to a cleanup label with the result stored in `res`.
#define TCCL_CHECK_GOTO(call, res, label)                                              \
  do {                                                                                 \
    (res) = (call);                                                                    \
    if ((res) != tcclSuccess) {                                                        \
      TCCL_INFO(::tccl::kAll, "%s:%d -> %d", __FILE__, __LINE__, (int)(res));          \
      goto label;                                                                      \
    }                                                                                  \
  } while (0)

/// A system call that returns -1 and sets errno on failure.
#define TCCL_SYS_CHECK(call, name)                                                     \
  do {                                                                                 \
    if ((call) == -1) {                                                                \
      TCCL_WARN("%s failed: %s", (name), strerror(errno));                             \
      return tcclSystemError;                                                          \
    }                                                                                  \
  } while (0)

/// Argument validation: logs a WARN naming the problem and returns tcclInvalidArgument.
#define TCCL_ARG_CHECK(cond, ...)                                                      \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      TCCL_WARN(__VA_ARGS__);                                                          \
      return tcclInvalidArgument;                                                      \
    }                                                                                  \
  } while (0)

#endif  // TCCL_COMMON_DEBUG_H_
