/*
 * tests/common/bootstrap_test_util.h: running bootstrap ranks as threads of one process.
 *
 * What it is: helpers shared by the thread-rank bootstrap tests. Each rank is a std::thread
 * that calls Bootstrap::create with the same unique id, as separate processes would; results
 * come back to the test's thread, which asserts on them.
 *
 * Invariants: every helper joins its threads before returning (no test leaks a running
 * rank), and a rank that fails records its result and its last-error text (thread-local, so
 * it must be read on that thread).
 *
 * NCCL counterpart: none (gloo's tests spawn ranks as threads the same way).
 * Added in: foundation (common/).
 */
#ifndef TCCL_TESTS_COMMON_BOOTSTRAP_TEST_UTIL_H_
#define TCCL_TESTS_COMMON_BOOTSTRAP_TEST_UTIL_H_

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tccl/common/bootstrap.h"
#include "tccl/common/debug.h"

namespace tccl {
namespace test {

/// A fresh id whose root runs in this process.
inline std::vector<char> newUniqueId() {
  std::vector<char> id(kUniqueIdBytes);
  if (bootstrapGetUniqueId(id.data()) != tcclSuccess) id.clear();
  return id;
}

/// What one rank's thread reports.
struct RankResult {
  tcclResult_t result = tcclInternalError;
  std::string lastError;
};

/// Runs body(rank, bootstrap) on `nranks` threads after each created its Bootstrap from
/// ids[rank] (one id for all when ids has one element). body returns false on failure.
inline std::vector<RankResult> runRanks(
    int nranks, const std::vector<std::vector<char>>& ids,
    const std::function<bool(int, Bootstrap&)>& body = nullptr) {
  std::vector<RankResult> results(nranks);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    threads.emplace_back([&, r] {
      setLogRank(r);
      clearLastError();
      const std::vector<char>& id = ids.size() == 1 ? ids[0] : ids[r];
      std::unique_ptr<Bootstrap> b;
      tcclResult_t res = Bootstrap::create(id.data(), r, nranks, &b);
      if (res == tcclSuccess && body && !body(r, *b)) res = tcclInternalError;
      results[r].result = res;
      results[r].lastError = lastError();
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

inline std::vector<RankResult> runRanks(
    int nranks, const std::vector<char>& id,
    const std::function<bool(int, Bootstrap&)>& body = nullptr) {
  return runRanks(nranks, std::vector<std::vector<char>>{id}, body);
}

/// Creates all ranks on threads and hands the endpoints to the caller's thread (which may then
/// drive them one call at a time). Empty on failure.
inline std::vector<std::unique_ptr<Bootstrap>> createAll(int nranks, const std::vector<char>& id) {
  std::vector<std::unique_ptr<Bootstrap>> out(nranks);
  std::vector<tcclResult_t> res(nranks, tcclInternalError);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] { res[r] = Bootstrap::create(id.data(), r, nranks, &out[r]); });
  for (auto& t : threads) t.join();
  for (tcclResult_t r : res)
    if (r != tcclSuccess) return {};
  return out;
}

/// Sets an environment variable for the lifetime of the object (only while no rank threads
/// run: setenv is not thread-safe against getenv).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    const char* old = getenv(name);
    hadOld_ = old != nullptr;
    if (hadOld_) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (hadOld_)
      setenv(name_.c_str(), old_.c_str(), 1);
    else
      unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool hadOld_ = false;
};

}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_COMMON_BOOTSTRAP_TEST_UTIL_H_
