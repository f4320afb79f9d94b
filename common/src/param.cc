/*
 * common/src/param.cc: parsing environment knobs.
 *
 * What it is: the reader behind TCCL_PARAM. Accepts decimal ("42", "-3"), hexadecimal
 * ("0x1f"), and binary size suffixes ("64K" = 65536, "2M", "1G"; upper or lower case).
 * Anything else (trailing junk, overflow, an empty number) is a user mistake: it is reported
 * with a WARN naming the variable and the default is used, so a typo never silently becomes 0.
 *
 * Invariants: never throws; a set and valid variable is logged once under the ENV subsystem
 * (TCCL_PARAM caches the result, so "once" means once per knob per process).
 *
 * NCCL counterpart: src/misc/param.cc (ncclLoadParam, initEnv).
 * Added in: foundation (common/).
 */
#include "tccl/common/param.h"

#include <cctype>
#include <cinttypes>
#include <cstdlib>
#include <limits>

#include "tccl/common/debug.h"

namespace tccl {
namespace {

// Parses `text` fully. Returns false on anything that is not a number with an optional suffix.
bool parseInt(const char* text, int64_t* out) {
  const char* p = text;
  while (isspace(static_cast<unsigned char>(*p))) ++p;
  bool negative = false;
  if (*p == '-' || *p == '+') {
    negative = *p == '-';
    ++p;
  }
  int base = 10;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  // Accumulate in unsigned 64 bits with an explicit overflow check (strtoll would clamp and
  // accept partial input in ways that are easy to get wrong).
  uint64_t value = 0;
  int digits = 0;
  for (;; ++p, ++digits) {
    int d;
    char c = *p;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (base == 16 && c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (base == 16 && c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      break;
    if (value > (std::numeric_limits<uint64_t>::max() - d) / base) return false;
    value = value * base + d;
  }
  if (digits == 0) return false;
  int shift = 0;
  switch (*p) {
    case 'k':
    case 'K':
      shift = 10;
      ++p;
      break;
    case 'm':
    case 'M':
      shift = 20;
      ++p;
      break;
    case 'g':
    case 'G':
      shift = 30;
      ++p;
      break;
    default:
      break;
  }
  while (isspace(static_cast<unsigned char>(*p))) ++p;
  if (*p != '\0') return false;
  if (shift != 0) {
    if (value > (std::numeric_limits<uint64_t>::max() >> shift)) return false;
    value <<= shift;
  }
  // The magnitude must fit: up to 2^63-1, or 2^63 for a negative number.
  const uint64_t limit = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (negative) {
    if (value > limit + 1) return false;
    *out = value == limit + 1 ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(value);
  } else {
    if (value > limit) return false;
    *out = static_cast<int64_t>(value);
  }
  return true;
}

}  // namespace

int64_t readIntParam(const char* name, int64_t def) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return def;
  int64_t value = 0;
  if (!parseInt(text, &value)) {
    TCCL_WARN(
        "invalid value \"%s\" for %s (expected an integer such as 42, 0x2a or 64K); "
        "using the default %" PRId64,
        text, name, def);
    return def;
  }
  TCCL_INFO(kEnv, "%s set by environment to %" PRId64, name, value);
  return value;
}

std::string getEnvString(const char* name, const char* def) {
  const char* text = getenv(name);
  if (text == nullptr || *text == '\0') return def != nullptr ? def : "";
  return text;
}

}  // namespace tccl
