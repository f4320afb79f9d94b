/*
 * labs/13-flag-before-data/lab.cc: lab 13 -- a producer publishes a FIFO step before its
 * data is in the slot. See README.md for the story; this is the program with the bug.
 *
 * What it is: a "custom ring all-gather" that a team wrote over its own copy of tccl's FIFO
 * protocol (chapter 1, device/fifo.h and device/primitives.h), between the processes of one
 * host. The copy is small but faithful:
 *
 *     producer (rank r, to r+1)                    consumer (rank r+1, from r)
 *     wait head + kNSteps > step (acquire)         wait tail > step (acquire)
 *     copy the block into slot step % kNSteps      check sizes[slot], read the slot
 *     sizes[slot] = bytes; tail = step+1 (release) head = step+1 (release)
 *
 * Every rank's block goes around the ring in nranks-1 steps, as tccl's ring all-gather moves
 * it; the program runs 8 all-gathers (iterations), so the step counters go on across them and
 * every slot is reused, as ConnInfo::step does. Each block carries a pattern -- (origin rank,
 * iteration, word index) in every 32-bit word -- so a wrong block says whose it really is.
 * Each FIFO step leaves one trace line on each side, modelled on the step timeline
 * (docs/seeing-it.md): the producer's "copy" line when the slot is filled, the consumer's
 * "recv" line when it saw tail, each with the CRC-32 of the bytes it wrote or read. After each
 * iteration tcclAllGather gathers the same blocks (tccl's own, right) and a checker compares.
 *
 * The bug: on one rank, at one step, both chosen by the seed, the producer stores tail before
 * it copies the data, so the consumer reads whatever the slot held kNSteps steps earlier. In a
 * real program that window is a few nanoseconds and the race is lost once in a million steps;
 * here the producer is then held up before its copy until the consumer has taken the step
 * (1 ms sleeps, 2 s at most), so that every seed shows it. With LAB_FIX=1 the order is right.
 *
 * Shared memory: one POSIX segment, /tccl-lab13-<MASTER_PORT>, created by rank 0 and unlinked
 * as soon as every rank has mapped it (a tcclAllReduce barrier on the world communicator
 * between the steps), so nothing is left in /dev/shm even when a rank is killed later.
 *
 * Invariants: every choice the seed makes is lab.py's instance(); the only data race is the
 * bug's; every wait is bounded (10 s), so a dead peer cannot hang a rank for ever; exit 0 only
 * when every all-gather agreed with tcclAllGather.
 *
 * NCCL counterpart: src/device/prims_simple.h (waitPeer/postPeer: the data, then a fence, then
 * the tail store); the LL protocol's flag in every 8 bytes (prims_ll.h) is the other answer.
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kNSteps = 8;    // slots per FIFO, as tccl::kNSteps and NCCL_STEPS
constexpr int kWords = 1024;  // a block: 1024 words of 32 bits, one step
constexpr size_t kStepBytes = kWords * sizeof(uint32_t);
constexpr int kIters = 8;            // all-gathers, one after the other
constexpr double kWaitSeconds = 10;  // the longest any wait may last

/// One connection (rank r -> rank r+1): the lab's copy of tccl::ConnFifo and its slots. Each
/// counter has its own cache line, as in tccl (the two sides spin on different lines).
struct Fifo {
  alignas(64) uint64_t tail;           // written by the producer: steps published
  alignas(64) uint64_t head;           // written by the consumer: steps consumed
  alignas(64) int64_t sizes[kNSteps];  // bytes in each slot, set by the producer
  alignas(64) uint32_t slots[kNSteps][kWords];
};

/// The segment: a clock origin (rank 0's, so that every rank's trace times line up) and one
/// FIFO per rank, the one it produces into.
struct Segment {
  alignas(64) uint64_t t0Ns;
  Fifo fifo[1];  // nranks of them (the segment is sized for that)
};

size_t segmentBytes(int nranks) { return sizeof(Segment) + sizeof(Fifo) * size_t(nranks - 1); }

uint64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // one clock for every process of the host
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

/// The pattern: origin rank, iteration and word index, each + 1 so that no word of a real
/// block is 0 (a slot that was never written reads as 0).
uint32_t pattern(int origin, int iter, int i) {
  return (uint32_t(origin + 1) << 24) | (uint32_t(iter + 1) << 16) | uint32_t(i);
}

/// CRC-32 (IEEE), bitwise: short, and the same number `crc32` tools print.
uint32_t crc32(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; i++) {
    c ^= b[i];
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}

/// Waits until *counter >= value (acquire: what was written before the matching release is
/// visible). Spins, then yields: ranks may outnumber cores. False after kWaitSeconds.
bool waitAtLeast(const uint64_t* counter, uint64_t value) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(int(kWaitSeconds * 1000));
  for (int spins = 0;; spins++) {
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= value) return true;
    if (spins > 1000) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      sched_yield();
    }
  }
}

struct Ring {
  lab::Lab* l;
  Segment* seg;
  int prev, next;
  int badStep;  // the producer step whose tail goes out first (-1: none on this rank)
  uint64_t sendStep = 0, recvStep = 0;

  void trace(const char* what, const char* peerKey, int peer, uint64_t step, int iter, int block,
             uint32_t crc, uint64_t tNs) {
    lab::say(*l,
             "trace t=%.1fus op=AllGatherFifo iter=%d \"%s\" %s=%d ch=0 step=%llu bytes=%zu "
             "block=%d crc=0x%08x",
             double(tNs - seg->t0Ns) / 1e3, iter, what, peerKey, peer, (unsigned long long)step,
             kStepBytes, block, crc);
  }

  /// Producer side of one step: `src` (the block of rank `block`) to the next rank.
  bool send(const uint32_t* src, int iter, int block) {
    Fifo& f = seg->fifo[l->rank];
    const uint64_t step = sendStep;
    // Protocol step 1: wait for a free slot (head + kNSteps > step), written without a
    // subtraction that would wrap on the first kNSteps steps.
    if (step + 1 > uint64_t(kNSteps) && !waitAtLeast(&f.head, step + 1 - kNSteps)) {
      lab::say(*l, "send step %llu to rank %d: no free slot after %.0f s (is rank %d alive?)",
               (unsigned long long)step, next, kWaitSeconds, next);
      return false;
    }
    const int slot = int(step % kNSteps);
    if (int64_t(step) != badStep) {
      // Steps 2 and 3, in the protocol's order: the data and its size, then tail. The
      // release store keeps both from moving after it: a consumer that sees tail = step + 1
      // (with acquire) sees the slot and the size as they are now.
      memcpy(f.slots[slot], src, kStepBytes);
      f.sizes[slot] = int64_t(kStepBytes);
      const uint64_t t = nowNs();
      __atomic_store_n(&f.tail, step + 1, __ATOMIC_RELEASE);
      trace("copy", "sendPeer", next, step, iter, block, crc32(f.slots[slot], kStepBytes), t);
    } else {
      // THE BUG: the size and tail are published first, the data after. The release store
      // orders what came before it, and the copy comes after: nothing stops the consumer
      // from reading the slot in between -- it holds the block of step - kNSteps.
      f.sizes[slot] = int64_t(kStepBytes);
      __atomic_store_n(&f.tail, step + 1, __ATOMIC_RELEASE);
      // The race made certain (see the top of the file): held up until the consumer has
      // taken the step, as a preempted thread or a slow write over PCIe would be.
      for (int ms = 0; ms < 2000 && __atomic_load_n(&f.head, __ATOMIC_ACQUIRE) < step + 1; ms++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      memcpy(f.slots[slot], src, kStepBytes);
      trace("copy", "sendPeer", next, step, iter, block, crc32(f.slots[slot], kStepBytes), nowNs());
    }
    sendStep++;
    return true;
  }

  /// Consumer side of one step: the block of rank `block`, from the previous rank, into dst.
  bool recv(uint32_t* dst, int iter, int block) {
    Fifo& f = seg->fifo[prev];
    const uint64_t step = recvStep;
    // Protocol step 1: wait until the producer has published this step (tail > step).
    if (!waitAtLeast(&f.tail, step + 1)) {
      lab::say(*l, "recv step %llu from rank %d: nothing after %.0f s (is rank %d alive?)",
               (unsigned long long)step, prev, kWaitSeconds, prev);
      return false;
    }
    const uint64_t t = nowNs();  // the step timeline's "wait recv" ends here
    const int slot = int(step % kNSteps);
    // The size was written before tail (release) and tail was read with acquire.
    if (f.sizes[slot] != int64_t(kStepBytes)) {
      lab::say(*l, "recv step %llu from rank %d: size %lld, expected %zu", (unsigned long long)step,
               prev, (long long)f.sizes[slot], kStepBytes);
      return false;
    }
    // Step 2: read the slot. Step 3: free it (release: our reads are done before the
    // producer may write the slot again, kNSteps steps later).
    memcpy(dst, f.slots[slot], kStepBytes);
    __atomic_store_n(&f.head, step + 1, __ATOMIC_RELEASE);
    trace("recv", "recvPeer", prev, step, iter, block, crc32(dst, kStepBytes), t);
    recvStep++;
    return true;
  }
};

/// A barrier on the world communicator: every rank adds `mine`; returns the sum (-1: failed).
int barrier(const lab::Lab& l, int mine) {
  int v = mine;
  if (!lab::ok(l, tcclAllReduce(&v, &v, 1, tcclInt32, tcclSum, l.comm, nullptr), "barrier")) {
    return -1;
  }
  return v;
}

/// Maps the segment: rank 0 creates it, the others open it once it exists, and rank 0
/// unlinks it once every rank has mapped it. Null on failure (on every rank).
Segment* mapSegment(const lab::Lab& l) {
  const char* port = getenv("MASTER_PORT");
  const std::string name = std::string("/tccl-lab13-") + (port ? port : "0");
  const size_t bytes = segmentBytes(l.nranks);
  Segment* seg = nullptr;
  auto map = [&](int fd) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    return p == MAP_FAILED ? nullptr : static_cast<Segment*>(p);
  };
  if (l.rank == 0) {
    shm_unlink(name.c_str());  // a leftover of a run killed between create and unlink
    const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0 && ftruncate(fd, off_t(bytes)) == 0) {
      seg = map(fd);  // zero-filled: every counter 0, every slot never written
    } else if (fd >= 0) {
      close(fd);
    }
    if (seg) seg->t0Ns = nowNs();
    if (seg == nullptr) {
      lab::say(l, "cannot create shared memory %s: %s", name.c_str(), strerror(errno));
    }
  }
  // Barrier 1: the segment exists (and is sized) before anyone opens it.
  if (barrier(l, 1) != l.nranks) return nullptr;
  if (l.rank != 0) {
    const int fd = shm_open(name.c_str(), O_RDWR, 0600);
    seg = fd >= 0 ? map(fd) : nullptr;
    if (seg == nullptr) {
      lab::say(l, "cannot open shared memory %s: %s", name.c_str(), strerror(errno));
    }
  }
  // Barrier 2: every rank has mapped it (or failed): the name is no longer needed. The
  // mappings keep the memory; the name goes now, so no kill later can leave it behind.
  const int mapped = barrier(l, seg != nullptr ? 1 : 0);
  if (l.rank == 0) shm_unlink(name.c_str());
  if (mapped != l.nranks) {
    if (seg) munmap(seg, bytes);
    return nullptr;
  }
  return seg;
}

/// The checker: the FIFO all-gather's blocks against tcclAllGather's. Says which block is
/// wrong, where it came from and whose data it really holds. Returns the blocks that differ;
/// *first (when empty) gets the first finding, for the summary at the end.
int check(const lab::Lab& l, int iter, const std::vector<uint32_t>& mine,
          const std::vector<uint32_t>& ref, std::string* first) {
  int bad = 0;
  const int n = l.nranks;
  for (int b = 0; b < n; b++) {
    const uint32_t* got = &mine[size_t(b) * kWords];
    const uint32_t* want = &ref[size_t(b) * kWords];
    int wrong = 0;
    for (int i = 0; i < kWords; i++) wrong += got[i] != want[i];
    if (wrong == 0) continue;
    bad++;
    // Rank b's block reached this rank at ring step (rank - b - 1) mod n of the iteration.
    const int s = ((l.rank - b - 1) % n + n) % n;
    const unsigned long long step = (unsigned long long)(iter * (n - 1) + s);
    const uint32_t w = got[0];
    const int origin = int(w >> 24) - 1, itOf = int((w >> 16) & 0xff) - 1;
    char whose[96];
    if (w == 0) {
      snprintf(whose, sizeof whose, "zeros (a slot never written)");
    } else {
      snprintf(whose, sizeof whose, "rank %d's block of iter %d", origin, itOf);
    }
    char where[96];
    snprintf(where, sizeof where, "rank %d's, arrived here at step %llu from rank %d", b, step,
             (l.rank + n - 1) % n);
    lab::say(l,
             "check iter %d: block %d (%s) differs from tcclAllGather in %d of %d words: it "
             "holds %s",
             iter, b, where, wrong, kWords, whose);
    if (first->empty()) {
      *first = "first: iter " + std::to_string(iter) + ", block " + std::to_string(b) + " (" +
               where + ")";
    }
  }
  return bad;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l)) return 2;
  const int n = l.nranks;
  // The instance (lab.py: instance()): which rank publishes too early, and at which step of
  // its connection (never among the first kNSteps: the slot then holds an older block).
  const int badRank = lab::pick(l.seed, 0, n);
  const int total = kIters * (n - 1);
  const int badStep = kNSteps + lab::pick(l.seed, 1, total - kNSteps);

  Segment* seg = mapSegment(l);
  if (seg == nullptr) {
    tcclCommAbort(l.comm);
    return 1;
  }
  Ring ring{&l, seg, (l.rank + n - 1) % n, (l.rank + 1) % n,
            (!l.fixed && l.rank == badRank) ? badStep : -1};

  bool good = true;
  int wrongIters = 0;
  std::string first;  // the checker's first finding
  std::vector<uint32_t> out(size_t(n) * kWords), ref(size_t(n) * kWords);
  for (int iter = 0; iter < kIters && good; iter++) {
    uint32_t* own = &out[size_t(l.rank) * kWords];
    for (int i = 0; i < kWords; i++) own[i] = pattern(l.rank, iter, i);
    // The ring all-gather: at step s each rank sends the block it got at step s-1 (its own at
    // step 0) and receives the block of rank (rank - s - 1), which it forwards next.
    for (int s = 0; s < n - 1 && good; s++) {
      const int sendBlock = ((l.rank - s) % n + n) % n;
      const int recvBlock = ((l.rank - s - 1) % n + n) % n;
      good = ring.send(&out[size_t(sendBlock) * kWords], iter, sendBlock) &&
             ring.recv(&out[size_t(recvBlock) * kWords], iter, recvBlock);
    }
    if (!good) break;
    // tccl's own all-gather of the same blocks: the reference.
    if (!lab::ok(l, tcclAllGather(own, ref.data(), kWords, tcclUint32, l.comm, nullptr),
                 "tcclAllGather")) {
      good = false;
      break;
    }
    if (check(l, iter, out, ref, &first) > 0) wrongIters++;
  }
  if (good && wrongIters > 0) {
    lab::say(l,
             "FIFO all-gather: %d of %d iterations differ from tcclAllGather (%s; the "
             "lines \"check iter\" above say more)",
             wrongIters, kIters, first.c_str());
    good = false;
  } else if (good) {
    lab::say(l, "FIFO all-gather: %d iterations, every block equal to tcclAllGather's", kIters);
  }
  munmap(seg, segmentBytes(n));
  return lab::finish(l, good);
}
