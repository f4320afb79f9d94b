/*
 * labs/14-graph-capture-mismatch/lab.cc: lab 14 -- one rank captures a different sequence of
 * collectives into its CUDA graph. See README.md for the story; this is the program with the
 * bug. It needs a GPU: built without CUDA, or run where there is none, it says so and exits 2.
 *
 * What it is: the training step of a toy data-parallel job, made fast the way PyTorch makes
 * it fast (torch.cuda.graph): every rank
 *   1. runs one step eagerly (the warm-up: it connects everything the step uses),
 *   2. captures the step into a CUDA graph -- kBuckets device all-reduces of gradient
 *      buckets of different sizes, cudaStreamBeginCapture ... cudaStreamEndCapture -- and
 *      instantiates it,
 *   3. meets the others at a barrier (a host all-reduce: every rank has its graph),
 *   4. replays the graph kReplays times (cudaGraphLaunch), with new gradients before each
 *      replay, and checks the all-reduced buckets.
 * On one rank, chosen by the seed, the capture takes another branch, as rank-local state
 * makes it do in real programs: either it captures one all-reduce more (an overflow flag of
 * one float, at a seeded place: a mixed-precision "found inf" check that only its branch
 * makes), or one fewer (a seeded bucket skipped: its gradients were not ready, as with
 * unused parameters). With LAB_FIX=1 every rank captures the same step.
 *
 * What a learner sees, and why (read from the library): a captured call launches nothing; the
 * flight recorder records it and marks it completed when the capture call returns
 * (group_launch.cc), and a replay is not a call at all -- so the watchdog never has an
 * operation to wait for, and a replay that hangs is a cudaStreamSynchronize that never
 * returns. The program therefore bounds its own wait: it polls cudaStreamQuery for up to
 * kReplayWaitS seconds, then reports "the graph did not finish" and revokes the communicator
 * (the abort flag every kernel's spin loop checks), so that the graph's kernels leave.
 * Ranks whose replay does finish find its kernels' errors (tcclCommGetAsyncError: a FIFO step
 * of the wrong size) or wrong sums. Every rank writes its flight recorder at the end; the
 * dumps hold what each rank captured (TCCL_CHECK_MODE=1 compares it as it is captured).
 *
 * Teardown: the ranks share one GPU and reach each other's FIFOs through CUDA IPC; memory a
 * peer has mapped must not be freed while the peer's kernels may still touch it. So after a
 * failed replay every rank waits until every rank's replay has ended (the same bounded wait,
 * plus a margin) before it aborts its communicator.
 *
 * Invariants: every choice the seed makes is lab.py's instance(); every wait is bounded; the
 * buggy run never passes on every rank; exit 0 only when every replay was right.
 *
 * NCCL counterpart: none (a teaching device); NCCL's side of graph capture is
 * src/enqueue.cc (ncclLaunchPrepare with a captured stream, persistent plans).
 * Added in: stage 7 (labs).
 */
#include "lab.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if TCCL_LAB_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#if !TCCL_LAB_HAVE_CUDA

int main() {
  printf("lab 14 needs a GPU: this build has no CUDA (build the tree on a GPU machine)\n");
  return 2;
}

#else

namespace {

constexpr int kBuckets = 4;
// Elements per gradient bucket: all different, so a shifted sequence shows in the signatures.
constexpr size_t kBucketCounts[kBuckets] = {4096, 1024, 3072, 2048};
constexpr int kReplays = 3;
constexpr double kReplayWaitS = 10;  // the longest a replay may take before it is a hang
constexpr double kTeardownMarginS = 0.5;
constexpr int kFlag = -1;  // in a schedule: the overflow flag's all-reduce (one float)

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Waits until `s` has run everything queued on it, polling (a kernel that never ends would
/// keep cudaStreamSynchronize for ever). True when the stream finished within `seconds`;
/// *err then says whether it finished with a CUDA error.
bool waitStream(cudaStream_t s, double seconds, cudaError_t* err) {
  const Clock::time_point t0 = Clock::now();
  for (;;) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e != cudaErrorNotReady) {
      *err = e;
      return true;
    }
    if (secondsSince(t0) > seconds) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

/// What rank r puts into bucket k at training step `step` (0: the eager warm-up), and what
/// the all-reduce gives back: every value is a small integer, exact in float.
float gradient(int r, int k, int step) { return float((r + 1) + 10 * (k + 1) + 100 * step); }
float reduced(int n, int k, int step) {
  return float(n * (n + 1) / 2 + n * (10 * (k + 1) + 100 * step));
}

struct Step {
  std::vector<float*> bucket;  // device buffers, one per bucket
  float* flag = nullptr;       // device: the overflow flag (0: no overflow)
  std::vector<float> host;
};

const char* cudaWhy(cudaError_t e) { return cudaGetErrorString(e); }

/// New gradients into every bucket (before a replay: outside the graph).
bool upload(const lab::Lab& l, Step& st, int step, cudaStream_t s) {
  for (int k = 0; k < kBuckets; k++) {
    st.host.assign(kBucketCounts[k], gradient(l.rank, k, step));
    cudaError_t e = cudaMemcpyAsync(st.bucket[size_t(k)], st.host.data(), kBucketCounts[k] * 4,
                                    cudaMemcpyHostToDevice, s);
    // (Pageable memory: the copy has read st.host when the call returns.)
    if (e != cudaSuccess) {
      lab::say(l, "cudaMemcpyAsync: %s", cudaWhy(e));
      return false;
    }
  }
  const float zero = 0.0f;
  return cudaMemcpyAsync(st.flag, &zero, 4, cudaMemcpyHostToDevice, s) == cudaSuccess;
}

/// The buckets against the sums they should hold; says the first wrong one.
bool checkBuckets(const lab::Lab& l, Step& st, int step, const char* when) {
  for (int k = 0; k < kBuckets; k++) {
    st.host.assign(kBucketCounts[k], 0.0f);
    if (cudaMemcpy(st.host.data(), st.bucket[size_t(k)], kBucketCounts[k] * 4,
                   cudaMemcpyDeviceToHost) != cudaSuccess) {
      lab::say(l, "%s: cannot read bucket %d back", when, k);
      return false;
    }
    const float want = reduced(l.nranks, k, step);
    for (size_t i = 0; i < kBucketCounts[k]; i++) {
      if (st.host[i] != want) {
        lab::say(l, "%s: wrong result: bucket %d (%zu floats), element %zu is %g, expected %g",
                 when, k, kBucketCounts[k], i, double(st.host[i]), double(want));
        return false;
      }
    }
  }
  return true;
}

/// Issues the schedule's all-reduces on `s` (captured when `s` is being captured).
bool issue(const lab::Lab& l, Step& st, const std::vector<int>& schedule, cudaStream_t s,
           const char* when) {
  for (int op : schedule) {
    const bool flag = op == kFlag;
    float* buf = flag ? st.flag : st.bucket[size_t(op)];
    const size_t count = flag ? 1 : kBucketCounts[op];
    const tcclResult_t r = tcclAllReduce(buf, buf, count, tcclFloat32, tcclSum, l.comm, s);
    if (r != tcclSuccess) {
      char what[96];
      snprintf(what, sizeof what, "%s: all-reduce of %s", when,
               flag ? "the overflow flag" : ("bucket " + std::to_string(op)).c_str());
      return lab::ok(l, r, what);
    }
  }
  return true;
}

/// A barrier on host memory: every rank's `mine` summed; -1 when it failed.
int barrier(const lab::Lab& l, int mine, const char* what) {
  int v = mine;
  if (!lab::ok(l, tcclAllReduce(&v, &v, 1, tcclInt32, tcclSum, l.comm, nullptr), what)) return -1;
  return v;
}

}  // namespace

int main() {
  lab::Lab l;
  if (!lab::init(&l, /*makeComm=*/false)) return 2;
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    lab::say(l, "lab 14 needs a GPU: none is visible here");
    return 2;
  }
  // Every rank on GPU 0: the ranks share one GPU (their kernels reach each other's FIFOs
  // through CUDA IPC, tccl's P2P transport). Set before the communicator learns its device.
  if (cudaSetDevice(0) != cudaSuccess) {
    lab::say(l, "cudaSetDevice(0) failed");
    return 2;
  }
  if (!lab::ok(l, tcclCommInitFromEnv(&l.comm), "tcclCommInitFromEnv")) return 2;

  // The instance (lab.py: instance()): which rank, one more or one fewer, and where.
  const int badRank = lab::pick(l.seed, 0, l.nranks);
  const bool extra = lab::pick(l.seed, 2, 2) == 0;
  const int at = lab::pick(l.seed, 1, extra ? kBuckets + 1 : kBuckets);
  std::vector<int> step;  // the training step's all-reduces, as every rank should issue them
  for (int k = 0; k < kBuckets; k++) step.push_back(k);
  std::vector<int> captured = step;  // what this rank captures
  if (!l.fixed && l.rank == badRank) {
    if (extra) {
      captured.insert(captured.begin() + at, kFlag);  // its branch checks for overflow
    } else {
      captured.erase(captured.begin() + at);  // its branch skips a bucket
    }
  }

  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  Step st;
  st.bucket.resize(kBuckets);
  bool good = stream != nullptr;
  for (int k = 0; k < kBuckets && good; k++) {
    good = cudaMalloc(&st.bucket[size_t(k)], kBucketCounts[k] * 4) == cudaSuccess;
  }
  good = good && cudaMalloc(&st.flag, 4) == cudaSuccess;
  if (!good) lab::say(l, "cannot allocate the buckets on the GPU");

  // 1. One step eagerly: the same calls on every rank; connects what the step needs.
  cudaError_t err = cudaSuccess;
  if (good) {
    good = upload(l, st, 0, stream) && issue(l, st, step, stream, "eager step");
    if (good && (!waitStream(stream, kReplayWaitS, &err) || err != cudaSuccess)) {
      lab::say(l, "eager step: the stream did not finish (%s)", cudaWhy(err));
      good = false;
    }
    good = good && checkBuckets(l, st, 0, "eager step");
    if (good) lab::say(l, "eager step: %d buckets all-reduced, right", kBuckets);
  }

  // 2. The capture. A captured call launches nothing: it adds kernel nodes to the graph.
  cudaGraphExec_t exec = nullptr;
  if (good) {
    cudaGraph_t graph = nullptr;
    // Thread-local mode: only this thread is kept from calls a capture forbids. (In global
    // mode, PyTorch's default, another thread's cudaEventQuery during the capture -- tccl's
    // watchdog polls its lastLaunch event every tick -- is refused and breaks the capture:
    // PyTorch met this with its own NCCL watchdog, pytorch/pytorch#104487 and #148594.)
    good = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
    const bool issued = good && issue(l, st, captured, stream, "capture");
    const cudaError_t endErr = cudaStreamEndCapture(stream, &graph);
    if (good && endErr != cudaSuccess) lab::say(l, "cudaStreamEndCapture: %s", cudaWhy(endErr));
    good = good && issued && endErr == cudaSuccess &&
           cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
    if (graph != nullptr) cudaGraphDestroy(graph);
    if (good) lab::say(l, "captured the training step into a CUDA graph");
  }
  // 3. Every rank has its graph. (A rank whose capture failed does not come: with the check
  // mode every rank's capture fails at the same collective, or its barrier does, there.)
  if (good) good = barrier(l, 1, "barrier after the capture") == l.nranks;

  // 4. The replays.
  bool replayed = false;          // a replay was launched: peers' kernels may be running
  Clock::time_point replayStart;  // when the last one was
  bool hung = false;
  for (int r = 1; r <= kReplays && good; r++) {
    char when[32];
    snprintf(when, sizeof when, "replay %d", r);
    if (!upload(l, st, r, stream)) {
      good = false;
      break;
    }
    replayStart = Clock::now();
    replayed = true;
    if (cudaGraphLaunch(exec, stream) != cudaSuccess) {
      lab::say(l, "%s: cudaGraphLaunch failed", when);
      good = false;
      break;
    }
    if (!waitStream(stream, kReplayWaitS, &err)) {
      lab::say(l,
               "%s: graph replay did not finish: the stream is still busy after %.0f s "
               "(cudaStreamQuery: not ready)",
               when, kReplayWaitS);
      good = false;
      hung = true;
      break;
    }
    if (err != cudaSuccess) {
      lab::say(l, "%s: the graph failed: %s", when, cudaWhy(err));
      good = false;
      break;
    }
    tcclResult_t async = tcclSuccess;
    tcclCommGetAsyncError(l.comm, &async);
    if (async != tcclSuccess) {
      lab::say(l,
               "%s: the graph finished, but its kernels failed: tcclCommGetAsyncError says "
               "%s",
               when, tcclGetErrorString(async));
      good = false;
      break;
    }
    good = checkBuckets(l, st, r, when);
    if (good) lab::say(l, "%s: right", when);
  }
  // 5. The end: a barrier, so that no rank frees what another's kernels still use.
  if (good) {
    good = barrier(l, 1, "barrier after the replays") == l.nranks;
    if (good) lab::say(l, "training finished: %d replays, every bucket right", kReplays);
  }
  bool stuck = false;  // kernels still running: nothing they use may be freed
  if (!good && hung) {
    // The graph's kernels spin on FIFOs that will never move. Revoking raises the abort
    // flag they check, and they leave.
    lab::ok(l, tcclCommRevoke(l.comm, TCCL_REVOKE_DEFAULT), "tcclCommRevoke");
    stuck = !waitStream(stream, kReplayWaitS, &err);
    lab::say(l, "tcclCommRevoke: the graph's kernels %s",
             stuck ? "are still running" : "left their spin loops");
  }
  if (!good && replayed) {
    // Other ranks' kernels may still poll our FIFOs (CUDA IPC): wait until every rank's
    // replay has finished or been given up, then free.
    const double rest = kReplayWaitS + kTeardownMarginS - secondsSince(replayStart);
    if (rest > 0) std::this_thread::sleep_for(std::chrono::duration<double>(rest));
  }
  tcclCommDumpFlightRecorder(l.comm, nullptr);
  if (stuck) return 1;  // (the process's end takes the GPU context, kernels and all)
  lab::end(l.comm, good);
  if (exec != nullptr) cudaGraphExecDestroy(exec);
  for (float* p : st.bucket) cudaFree(p);
  cudaFree(st.flag);
  if (stream != nullptr) cudaStreamDestroy(stream);
  return good ? 0 : 1;
}

#endif  // TCCL_LAB_HAVE_CUDA
