/*
 * tests/soak/soak.cc: thousands of random operations on several communicators, each checked.
 *
 * What it is: a time-bounded soak. Every rank draws the same sequence from one seeded RNG:
 *  - a collective (any of the five, any type, any op including premulsum, count 0..~1 Mi
 *    elements skewed small, out of place / in place / unaligned, any root), checked by
 *    tests/ring/ring_case.h against the harness's reference, guards and untouched buffers;
 *  - a p2p shift (grouped tcclSend/tcclRecv to rank+k / from rank-k, k = 0 is a self message)
 *    or an all-to-all, checked byte for byte against the sender's input;
 *  - a group of 2..5 of the above, spread over the communicators;
 *  - now and then (1 in 250) a communicator destroyed and made again, so that the lazy
 *    connection setup also happens inside random groups, not only at the start;
 * on three communicators over the same ranks: two in world-rank order (used alternately and
 * together inside groups) and one with the ranks reversed (a different ring). Buffers are host
 * memory, and also device memory (chosen per operation) when tccl::test::haveGpu().
 *
 * Knobs (environment):
 *   TCCL_SOAK_SECONDS   how long to keep starting operations (default 120)
 *   TCCL_SOAK_SEED      the RNG seed (default: random, printed; set it to repeat a run)
 *   TCCL_SOAK_OPS       stop after this many operations (0 = no limit, the default)
 *   TCCL_SOAK_MAX_COUNT the largest element count (default 1 Mi + 7)
 *   TCCL_SOAK_VERBOSE   1: rank 0 prints every operation before issuing it
 * Run: ctest -L soak (tests/soak/soak_tests.cmake), or
 *   TCCL_SOAK_SECONDS=600 mpirun -np 4 --oversubscribe build/tests/s2_test_soak
 *
 * Invariants: every rank makes the same tccl calls in the same order (the sequence depends only
 * on the seed; timing jitter comes from a second, per-rank RNG and changes no call); after each
 * operation the ranks agree whether every call succeeded and stop together if one did not
 * (their calls would no longer match). Wrong data is recorded and the soak goes on.
 *
 * NCCL counterpart: none in NCCL; nccl-tests' -c check over long runs, in spirit.
 * Added in: reliability (tests/soak), for stage 2 and every later stage.
 */
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ring_case.h"

namespace tccl {
namespace test {
namespace soak {
namespace {

using ring::CaseRun;
using ring::Coll;
using ring::CollBuffer;
using ring::Inputs;
using ring::Place;

constexpr size_t kPeriod = 65521;  // a prime: misplaced data does not land on equal values
constexpr int kSeeds = 3;          // input tables per signedness (different data per op)

uint64_t envU64(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return def;
  return std::strtoull(v, nullptr, 0);
}

/// One communicator of the soak and its name in failure messages.
struct SoakComm {
  tcclComm_t comm = nullptr;
  const char* name = "";
  bool reversed = false;  // comm rank = nranks - 1 - world rank
};

tcclResult_t initComm(tcclComm_t* comm, bool reversed) {
  tcclUniqueId id{};
  tcclResult_t res = tcclSuccess;
  if (worldRank() == 0) res = tcclGetUniqueId(&id);
  if (!allRanksOk(res == tcclSuccess)) return res != tcclSuccess ? res : tcclSystemError;
  bcast(&id, sizeof(id), 0);
  const int rank = reversed ? worldSize() - 1 - worldRank() : worldRank();
  return tcclCommInitRank(comm, worldSize(), id, rank);
}

/// A p2p operation: a shift by k (grouped send + recv) or an all-to-all.
class P2pRun {
 public:
  P2pRun(const SoakComm& c, const Inputs& in, DType t, size_t count, int shift, bool alltoall,
         size_t offset, MemKind kind)
      : c_(c), in_(in), t_(t), count_(count), shift_(shift), alltoall_(alltoall), offset_(offset) {
    tcclCommUserRank(c.comm, &rank_);
    tcclCommCount(c.comm, &n_);
    const size_t blocks = alltoall ? size_t(n_) : 1;
    const size_t bytes = blocks * count * dtypeSize(t);
    send_ = std::make_unique<CollBuffer>(bytes, kind);
    recv_ = std::make_unique<CollBuffer>(bytes, kind);
    const std::vector<char>& input = in.filled(t, rank_, offset, blocks * count);
    send_->write(0, input.data(), input.size());
  }

  std::string describe() const {
    return std::string(alltoall_ ? "alltoall" : "shift " + std::to_string(shift_)) + " " +
           dtypeName(t_) + " count " + std::to_string(count_) + " on " + c_.name + " " +
           memKindName(send_->kind());
  }

  /// The calls (inside the caller's group, if any). Returns the first error.
  tcclResult_t issue() {
    const tcclDataType_t tt = ring::toTccl(t_);
    if (alltoall_) return tcclAlltoAll(send_->data(), recv_->data(), count_, tt, c_.comm, nullptr);
    const int to = (rank_ + shift_) % n_, from = (rank_ - shift_ + n_) % n_;
    tcclResult_t r = tcclGroupStart();
    tcclResult_t s = tcclSend(send_->data(), count_, tt, to, c_.comm, nullptr);
    tcclResult_t v = tcclRecv(recv_->data(), count_, tt, from, c_.comm, nullptr);
    tcclResult_t e = tcclGroupEnd();
    for (tcclResult_t x : {r, s, v, e}) {
      if (x != tcclSuccess) return x;
    }
    return tcclSuccess;
  }

  /// Checks the received blocks, the guards, and that the send buffer is unchanged.
  bool check(std::string* why) {
    const size_t es = dtypeSize(t_), blk = count_ * es;
    const int blocks = alltoall_ ? n_ : 1;
    const uint8_t* rv = recv_->view();
    for (int b = 0; b < blocks; b++) {
      // All-to-all: block b came from rank b, which sent its block `rank_`.
      const int src = alltoall_ ? b : (rank_ - shift_ + n_) % n_;
      const size_t srcOffset = offset_ + (alltoall_ ? size_t(rank_) * count_ : 0);
      const std::vector<char>& expected = in_.filled(t_, src, srcOffset, count_);
      // blk == 0: an empty vector's data() may be null, and memcmp(p, nullptr, 0) is
      // undefined (UBSan says so), so there is nothing to compare.
      if (blk != 0 && std::memcmp(rv + CollBuffer::kGuard + b * blk, expected.data(), blk) != 0) {
        *why = "block " + std::to_string(b) + " (from rank " + std::to_string(src) + ") differs";
        return false;
      }
    }
    if (!recv_->guardsIntact(rv, why)) return false;
    const uint8_t* sv = send_->view();
    const std::vector<char>& input = in_.filled(t_, rank_, offset_, size_t(blocks) * count_);
    if (!send_->guardsIntact(sv, why)) return false;
    if (!input.empty() && std::memcmp(sv + CollBuffer::kGuard, input.data(), input.size()) != 0) {
      *why = "the send buffer was modified";
      return false;
    }
    return true;
  }

 private:
  SoakComm c_;
  const Inputs& in_;
  DType t_;
  size_t count_;
  int shift_;
  bool alltoall_;
  size_t offset_;
  int rank_ = 0, n_ = 1;
  std::unique_ptr<CollBuffer> send_, recv_;
};

/// One item of the sequence: a collective or a p2p operation.
struct Item {
  std::unique_ptr<CaseRun> coll;
  std::unique_ptr<P2pRun> p2p;
  const char* comm = "";
  std::string describe() const {
    return coll ? coll->spec().describe() + " on " + comm : p2p->describe();
  }
};

class Soak {
 public:
  Soak(uint64_t seed, std::vector<SoakComm>& comms)
      : rng_(seed), jitter_(seed * 1000003 + uint64_t(worldRank())), comms_(comms) {
    n_ = worldSize();
    maxCount_ = envU64("TCCL_SOAK_MAX_COUNT", (size_t{1} << 20) + 7);
    verbose_ = envU64("TCCL_SOAK_VERBOSE", 0) != 0;
    for (int s = 0; s < kSeeds; s++) {
      for (bool sgn : {false, true}) {
        inputs_[s][sgn] = std::make_unique<Inputs>(n_, sgn, 101 + s, kPeriod);
      }
    }
  }

  /// Runs one operation (or one group); false when a tccl call failed on some rank.
  bool step(uint64_t index) {
    // Now and then a communicator is destroyed and made again, so that connection setup
    // (lazy, at the first group that needs a peer) happens inside random groups, not only
    // at the start.
    if (pick(kRecreateEvery) == 0) return recreate(index, comms_[pick(comms_.size())]);
    std::vector<Item> items;
    const bool group = pick(100) < 20;
    const MemKind kind = pickKind();
    const int nItems = group ? 2 + int(pick(4)) : 1;
    for (int i = 0; i < nItems; i++) items.push_back(makeItem(kind, index));
    if (verbose_ && worldRank() == 0) {
      std::printf("soak: op #%llu%s\n", (unsigned long long)index, group ? " (group)" : "");
      for (const Item& it : items) std::printf("  %s\n", it.describe().c_str());
      std::fflush(stdout);
    }
    // Jitter: ranks enter at slightly different times (per-rank RNG: no effect on the calls).
    if (jitter_() % 4 == 0) usleep(useconds_t(jitter_() % 300));

    bool callsOk = true;
    std::string callError;
    if (group) callsOk = tcclGroupStart() == tcclSuccess;
    for (Item& it : items) {
      tcclResult_t r = it.coll ? it.coll->issue() : it.p2p->issue();
      if (r != tcclSuccess && callsOk) {
        callsOk = false;
        callError = it.describe() + ": " + tcclGetErrorString(r) + ": " + tcclGetLastError(nullptr);
      }
    }
    if (group) {
      tcclResult_t r = tcclGroupEnd();
      if (r != tcclSuccess && callsOk) {
        callsOk = false;
        callError = std::string("tcclGroupEnd: ") + tcclGetErrorString(r) + ": " +
                    tcclGetLastError(nullptr);
      }
    }
    deviceSync();
    for (Item& it : items) {
      // check() also destroys a premulsum op, so it runs even when a call failed; the data
      // of a failed group is not judged (the failure is reported below, once).
      std::string why;
      bool ok;
      if (it.coll) {
        ring::CaseResult res = it.coll->check();
        ok = !callsOk || res.ok;
        why = res.why;
      } else {
        ok = !callsOk || it.p2p->check(&why);
      }
      if (!ok) fail(index, (group ? "in a group: " : "") + why + " [" + it.describe() + "]");
    }
    tally(items, group);
    if (!allRanksOk(callsOk)) {
      fail(index, callsOk ? "a tccl call failed on another rank" : callError);
      return false;
    }
    return true;
  }

  int failures() const { return failures_; }
  const std::string& report() const { return report_; }
  std::string stats() const {
    std::string s;
    for (auto& [name, n] : kinds_) s += " " + name + "=" + std::to_string(n);
    return s;
  }
  uint64_t items() const { return itemsDone_; }
  double gibMoved() const { return double(bytes_) / double(1 << 30); }

 private:
  uint64_t pick(uint64_t n) { return rng_() % n; }

  static constexpr uint64_t kRecreateEvery = 250;

  bool recreate(uint64_t index, SoakComm& c) {
    if (verbose_ && worldRank() == 0) {
      std::printf("soak: op #%llu: recreate %s\n", (unsigned long long)index, c.name);
      std::fflush(stdout);
    }
    tcclResult_t r = tcclCommDestroy(c.comm);
    c.comm = nullptr;
    if (r == tcclSuccess) r = initComm(&c.comm, c.reversed);
    kinds_["recreate"]++;
    if (!allRanksOk(r == tcclSuccess)) {
      fail(index, std::string("recreating ") + c.name + ": " + tcclGetErrorString(r) + ": " +
                      tcclGetLastError(nullptr));
      return false;
    }
    return true;
  }

  MemKind pickKind() {
    const std::vector<MemKind> kinds = memKinds();
    return kinds[pick(kinds.size())];
  }

  /// A count, log-uniform in [1, maxCount) with 5% zeros: mostly small, sometimes ~1 Mi.
  size_t pickCount() {
    if (pick(100) < 5) return 0;
    int bits = 0;
    while ((size_t{1} << (bits + 1)) <= maxCount_) bits++;
    const int e = int(pick(uint64_t(bits) + 1));
    const size_t lo = size_t{1} << e >> 1, hi = std::min<size_t>(size_t{1} << e, maxCount_);
    return lo + pick(std::max<size_t>(hi - lo, 1));
  }

  Item makeItem(MemKind kind, uint64_t index) {
    Item it;
    const SoakComm& c = comms_[pick(comms_.size())];
    const std::vector<DType> types = allDTypes();
    const DType t = types[pick(types.size())];
    const Inputs& in = *inputs_[pick(kSeeds)][ring::isSignedType(t)];
    size_t count = pickCount();
    const int what = int(pick(100));
    if (what < 70) {
      const std::vector<Coll> colls = ring::allColls();
      const Coll coll = colls[pick(colls.size())];
      // AllGather and ReduceScatter take a per-rank count: keep their buffers ~maxCount too.
      if (coll == Coll::kAllGather || coll == Coll::kReduceScatter) count /= size_t(n_);
      const std::vector<ring::OpSpec> ops = ring::opsFor(t, haveGpu());
      const ring::OpSpec op = ops[pick(ops.size())];
      const Place place = Place(pick(3));
      const int root = int(pick(uint64_t(n_)));
      it.coll = std::make_unique<CaseRun>(
          c.comm, in, ring::Case{coll, t, op, count, place, root, kind});
      it.comm = c.name;
      kinds_[ring::collName(coll)]++;
      bytes_ += count * dtypeSize(t) * (coll == Coll::kAllGather ? n_ : 1);
    } else {
      const bool alltoall = what >= 90;
      if (alltoall) count /= size_t(n_);
      const int shift = int(pick(uint64_t(n_)));
      const size_t offset = size_t(index % kPeriod);
      it.p2p = std::make_unique<P2pRun>(c, in, t, count, shift, alltoall, offset, kind);
      kinds_[alltoall ? "alltoall" : "shift"]++;
      bytes_ += count * dtypeSize(t) * (alltoall ? n_ : 1);
    }
    return it;
  }

  void tally(const std::vector<Item>& items, bool group) {
    itemsDone_ += items.size();
    if (group) kinds_["groups"]++;
  }

  void fail(uint64_t index, const std::string& why) {
    if (failures_++ < 8) report_ += "\n  op #" + std::to_string(index) + ": " + why;
  }

  std::mt19937_64 rng_;     // the shared sequence: identical on every rank
  std::mt19937_64 jitter_;  // this rank's timing noise
  std::vector<SoakComm>& comms_;
  int n_ = 1;
  size_t maxCount_ = 0;
  bool verbose_ = false;
  std::unique_ptr<Inputs> inputs_[kSeeds][2];
  std::map<std::string, uint64_t> kinds_;
  uint64_t itemsDone_ = 0, bytes_ = 0;
  int failures_ = 0;
  std::string report_;
};

TEST(Soak, RandomOperationsOnSeveralCommunicators) {
  using Clock = std::chrono::steady_clock;
  const double seconds = double(envU64("TCCL_SOAK_SECONDS", 120));
  const uint64_t maxOps = envU64("TCCL_SOAK_OPS", 0);
  uint64_t seed = envU64("TCCL_SOAK_SEED", 0);
  if (seed == 0 && worldRank() == 0) seed = std::random_device{}() | 1;
  bcast(&seed, sizeof(seed), 0);

  std::vector<SoakComm> comms(3);
  const char* names[] = {"comm A", "comm B", "comm C (reversed ranks)"};
  bool initOk = true;
  for (int i = 0; i < 3; i++) {
    comms[i].name = names[i];
    comms[i].reversed = i == 2;
    tcclResult_t r = initComm(&comms[i].comm, comms[i].reversed);
    EXPECT_EQ(r, tcclSuccess) << names[i] << ": " << tcclGetLastError(nullptr);
    initOk = initOk && r == tcclSuccess;
  }
  if (allRanksOk(initOk)) {
    if (worldRank() == 0) {
      std::printf("soak: seed %llu (TCCL_SOAK_SEED=%llu repeats it), %d ranks, %.0f s, GPU %s\n",
                  (unsigned long long)seed, (unsigned long long)seed, worldSize(), seconds,
                  haveGpu() ? "yes" : "no");
      std::fflush(stdout);
    }
    Soak soak(seed, comms);
    const auto t0 = Clock::now();
    auto lastReport = t0;
    uint64_t ops = 0;
    for (;;) {
      // Rank 0's clock decides, so every rank stops after the same operation.
      int more = 1;
      if (worldRank() == 0) {
        const auto now = Clock::now();
        more = std::chrono::duration<double>(now - t0).count() < seconds &&
               (maxOps == 0 || ops < maxOps);
        if (now - lastReport > std::chrono::seconds(10)) {
          const double s = std::chrono::duration<double>(now - t0).count();
          std::printf("soak: %llu ops in %.0f s (%.1f ops/s), %d failure(s)\n",
                      (unsigned long long)ops, s, double(ops) / s, soak.failures());
          std::fflush(stdout);
          lastReport = now;
        }
      }
      bcast(&more, sizeof(more), 0);
      if (!more) break;
      if (!soak.step(ops++)) {
        ADD_FAILURE() << "a tccl call failed at op #" << (ops - 1)
                      << "; the soak stopped there (seed " << seed << ")";
        break;
      }
    }
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (worldRank() == 0) {
      std::printf("soak: done: %llu ops (%llu items) in %.1f s = %.1f ops/s, %.2f GiB per rank, "
                  "%d failure(s); items:%s\n",
                  (unsigned long long)ops, (unsigned long long)soak.items(), s, double(ops) / s,
                  soak.gibMoved(), soak.failures(), soak.stats().c_str());
      std::fflush(stdout);
    }
    EXPECT_EQ(soak.failures(), 0) << soak.failures() << " failure(s) on rank " << worldRank()
                                  << " (seed " << seed << "):" << soak.report();
  }
  for (SoakComm& c : comms) {
    if (c.comm != nullptr) {
      EXPECT_EQ(tcclCommDestroy(c.comm), tcclSuccess);
    }
  }
}

}  // namespace
}  // namespace soak
}  // namespace test
}  // namespace tccl
