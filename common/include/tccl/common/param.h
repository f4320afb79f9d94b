/*
 * common/param.h: typed environment parameters ("knobs") with defaults.
 *
 * What it is: NCCL's NCCL_PARAM, rebuilt. TCCL_PARAM(Name, "ENV", default) defines
 * `int64_t tcclParamName()`, which reads TCCL_ENV once, caches it, and logs the value under
 * the ENV subsystem when it differs from the default. String knobs use tccl::getEnvString().
 *
 * Invariants: a knob is read once per process (the first call wins); an unparsable value is
 * reported with a WARN and the default is used. Every knob is listed in docs/knobs.md (the
 * stage tool's `check` verifies it).
 *
 * NCCL counterpart: src/include/param.h (NCCL_PARAM), src/misc/param.cc.
 * Added in: foundation (common/).
 */
#ifndef TCCL_COMMON_PARAM_H_
#define TCCL_COMMON_PARAM_H_

#include <atomic>
#include <cstdint>
#include <string>

namespace tccl {

/// Reads environment variable `name` as an integer (decimal, 0x hex, or with a K/M/G suffix).
/// Returns `def` when unset or unparsable (the latter with a WARN).
int64_t readIntParam(const char* name, int64_t def);

/// Returns the environment variable or `def` when unset or empty.
std::string getEnvString(const char* name, const char* def = "");

}  // namespace tccl

/// Defines `int64_t tcclParam<Name>()` backed by environment variable TCCL_<env>.
/// Thread-safe: concurrent first calls read the same value.
#define TCCL_PARAM(Name, env, defaultValue)                                          \
  inline int64_t tcclParam##Name() {                                                 \
    static const int64_t value = ::tccl::readIntParam("TCCL_" env, (defaultValue));  \
    return value;                                                                    \
  }

#endif  // TCCL_COMMON_PARAM_H_
