/**
 * process_group_tccl.cc: the backend's life (communicator from the Store, close) and the
 * machinery every operation goes through: enqueue, the CUDA stream discipline, coalescing,
 * point-to-point calls and the barrier. The collectives themselves are in collectives_tccl.cc.
 * See process_group_tccl.h for the design.
 * Added in: stage 4.
 */
#include "process_group_tccl.h"

#include <c10/util/Exception.h>

#include <cstdio>
#include <cstring>

#include "torch_log.h"

namespace tccl_torch {

namespace {

// The Store key under which rank 0 publishes the unique id. Each process group gets a Store
// prefixed with its own name, so one key serves every group.
constexpr const char* kUniqueIdKey = "tccl_unique_id";

// The checks send and recv share: one tensor, no tag, a peer inside the group.
at::Tensor& p2pTensor(std::vector<at::Tensor>& tensors, int peer, int tag, int size,
                      const char* call, const char* role) {
  at::Tensor& t = singleTensor(tensors, call);
  TCCL_TORCH_CHECK(tag == 0, "tccl: ", call, ": tags are not supported (tag=", tag,
                   "): tccl, like NCCL, matches the messages between two ranks by their order");
  TCCL_TORCH_CHECK(peer >= 0 && peer < size, "tccl: ", call, ": ", role, " rank ", peer,
                   " is not in [0, ", size, ")");
  return t;
}

}  // namespace

ProcessGroupTccl::ProcessGroupTccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout)
    : BackendBase(rank, size) {
  // The bootstrap handshake, with the Store as the out-of-band channel (NCCL's
  // ncclGetUniqueId on rank 0, broadcast by the launcher: ProcessGroupNCCL::broadcastUniqueNCCLID).
  tcclUniqueId id;
  // >>> exercise 4.1: the unique id through the Store
  if (rank == 0) {
    check(tcclGetUniqueId(&id), "tcclGetUniqueId");
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store->set(kUniqueIdKey, std::vector<uint8_t>(bytes, bytes + sizeof(id)));
  } else {
    std::vector<uint8_t> bytes = store->get(kUniqueIdKey);  // blocks up to the Store's timeout
    TCCL_TORCH_CHECK(bytes.size() == sizeof(id), "tccl: the Store holds a unique id of ",
                     bytes.size(), " bytes, expected ", sizeof(id));
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  // <<< exercise 4.1
  check(tcclCommInitRank(&comm_, size, id, rank), "tcclCommInitRank");
  queue_ = std::make_unique<OpQueue>(rank, timeout);
  torchLog(rank, "process group of %d ranks up (timeout %lld ms)", size,
           (long long)timeout.count());
}

ProcessGroupTccl::~ProcessGroupTccl() { close(); }

void ProcessGroupTccl::close() {
  if (closed_) return;
  closed_ = true;
  const bool joined = queue_ ? queue_->stop() : true;
  const bool failed = queue_ && !queue_->failure().empty();
  if (!joined) {
    // The worker is still inside a tccl call that timed out: freeing the communicator under
    // it would be a use-after-free. Leave both to the process's exit (op_queue.h).
    std::fprintf(stderr,
                 "tccl_torch [rank %d] WARN leaving a communicator blocked in a "
                 "timed-out operation to the process's exit\n",
                 rank_);
    return;
  }
  if (comm_ != nullptr) {
    // After a failure the peers may be gone: abort does not wait for them.
    (void)(failed ? tcclCommAbort(comm_) : tcclCommDestroy(comm_));
    comm_ = nullptr;
  }
}

void ProcessGroupTccl::check(tcclResult_t res, const char* call) const {
  if (res == tcclSuccess) return;
  const char* last = comm_ != nullptr ? tcclGetLastError(comm_) : tcclGetLastError(nullptr);
  TCCL_TORCH_CHECK(false, "tccl: ", call, " failed: ", tcclGetErrorString(res),
                   (last != nullptr && *last != '\0') ? std::string(" (") + last + ")" : "");
}

// ---- enqueue and the stream discipline ------------------------------------------------------

c10::intrusive_ptr<WorkTccl> ProcessGroupTccl::makeWork(c10d::OpType type, const char* name,
                                                        std::vector<at::Tensor> outputs,
                                                        std::vector<at::Tensor> inputs,
                                                        const std::string& detail) {
  TCCL_TORCH_CHECK(!closed_, "tccl: ", name, " on a process group that was shut down");
  at::Device device(at::kCPU);
  for (const auto* list : {&outputs, &inputs}) {
    for (const at::Tensor& t : *list) {
      if (t.defined() && t.is_cuda()) device = t.device();
    }
  }
  auto work = c10::make_intrusive<WorkTccl>(rank_, type, name, ++seq_, outputs, device);
  work->keepAlive = std::move(inputs);
  if (device.is_cuda()) {
#if TCCL_TORCH_CUDA
    usedCuda_ = true;
    c10::cuda::CUDAGuard guard(device);
    if (!stream_ || stream_->device() != device) {
      stream_ = at::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
    }
    // Stream order: the collective must see what the caller's stream wrote before the call.
    work->start = std::make_unique<at::cuda::CUDAEvent>();
    work->start->record(c10::cuda::getCurrentCUDAStream(device.index()));
    work->end = std::make_unique<at::cuda::CUDAEvent>();
    work->stream = *stream_;
    // Allocator safety: memory of these tensors is not reused until the group stream passes
    // this point, even if Python frees them right after the call.
    for (const auto* list : {&outputs, &work->keepAlive}) {
      for (const at::Tensor& t : *list) {
        if (t.defined() && t.is_cuda() && t.storage().data_ptr().get() != nullptr) {
          c10::cuda::CUDACachingAllocator::recordStream(t.storage().data_ptr(), *stream_);
        }
      }
    }
#else
    TCCL_TORCH_CHECK(false, "tccl: ", name, ": this build of the backend has no CUDA support");
#endif
  }
  torchLog(rank_, "%s #%llu: queued (%s, %s)", name, (unsigned long long)work->seq(),
           device.str().c_str(), detail.c_str());
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::enqueue(c10d::OpType type, const char* name,
                                                         std::vector<at::Tensor> outputs,
                                                         std::vector<at::Tensor> inputs, Body body,
                                                         const std::string& detail, Finish finish) {
  std::lock_guard<std::recursive_mutex> lock(callerMutex_);
  auto work = makeWork(type, name, std::move(outputs), std::move(inputs), detail);
  if (coalescing_) {
    coalesced_.push_back(Pending{work, std::move(body), std::move(finish)});
    return work;
  }
  queue_->push(work, [this, body = std::move(body), finish = std::move(finish)](WorkTccl& w) {
    beginOnStream(w);
#if TCCL_TORCH_CUDA
    if (w.onCuda()) {
      c10::cuda::CUDAStreamGuard guard(*w.stream);  // staging copies go on the group stream
      body(w.stream->stream());
      if (finish) finish();
      endOnStream(w);
      return;
    }
#endif
    body(nullptr);
    if (finish) finish();
  });
  return work;
}

void ProcessGroupTccl::beginOnStream(WorkTccl& work) {
#if TCCL_TORCH_CUDA
  if (!work.onCuda()) return;
  c10::cuda::CUDAGuard guard(work.device());  // tccl and torch calls target this device
  work.start->block(*work.stream);
#else
  (void)work;
#endif
}

void ProcessGroupTccl::endOnStream(WorkTccl& work) {
#if TCCL_TORCH_CUDA
  if (!work.onCuda()) return;
  c10::cuda::CUDAGuard guard(work.device());
  work.end->record(*work.stream);
#else
  (void)work;
#endif
}

// ---- coalescing: many calls, one tcclGroupStart/End -----------------------------------------

void ProcessGroupTccl::beginCoalescing() {
  std::lock_guard<std::recursive_mutex> lock(callerMutex_);
  TCCL_TORCH_CHECK(!coalescing_, "tccl: startCoalescing inside a coalescing block");
  coalescing_ = true;
  coalesced_.clear();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::coalesced(const std::function<void()>& issue) {
  std::lock_guard<std::recursive_mutex> lock(callerMutex_);  // one block, one thread
  beginCoalescing();
  try {
    issue();
  } catch (...) {  // a member's argument error: drop the block, nothing was queued
    coalescing_ = false;
    coalesced_.clear();
    throw;
  }
  return finishCoalescing();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::finishCoalescing() {
  std::lock_guard<std::recursive_mutex> lock(callerMutex_);
  TCCL_TORCH_CHECK(coalescing_, "tccl: endCoalescing without startCoalescing");
  coalescing_ = false;
  std::vector<Pending> ops = std::move(coalesced_);
  coalesced_.clear();
  std::vector<at::Tensor> outputs;
  for (const Pending& p : ops) {
    for (const at::Tensor& t : p.work->result()) outputs.push_back(t);
  }
  // The group's Work: done when every member is; on CUDA its events bracket all of them.
  // The members were never queued on their own (enqueue kept them while coalescing_ was set):
  // this one job runs them all inside one tcclGroupStart/End.
  auto group = makeWork(kCoalescedOpType, "coalesced", outputs, {},
                        std::to_string(ops.size()) + " operations");
  queue_->push(group, [this, ops](WorkTccl& g) {
    try {
      beginOnStream(g);
      for (const Pending& p : ops) beginOnStream(*p.work);
      {
        GroupGuard guard;
        check(guard.ok() ? tcclSuccess : tcclInternalError, "tcclGroupStart");
        for (const Pending& p : ops) {
#if TCCL_TORCH_CUDA
          if (p.work->onCuda()) {
            c10::cuda::CUDAStreamGuard sg(*p.work->stream);
            p.body(p.work->stream->stream());
            continue;
          }
#endif
          p.body(nullptr);
        }
        check(guard.end(), "tcclGroupEnd");
      }
      // The group has run (host) or is enqueued (CUDA): now the steps that read its results.
      for (const Pending& p : ops) {
        if (!p.finish) continue;
#if TCCL_TORCH_CUDA
        if (p.work->onCuda()) {
          c10::cuda::CUDAStreamGuard sg(*p.work->stream);
          p.finish();
          continue;
        }
#endif
        p.finish();
      }
      for (const Pending& p : ops) {
        endOnStream(*p.work);
        p.work->complete();
      }
      endOnStream(g);
    } catch (...) {
      for (const Pending& p : ops) p.work->fail(std::current_exception());
      throw;
    }
  });
  return group;
}

// ---- point to point and the barrier ---------------------------------------------------------

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::send(std::vector<at::Tensor>& tensors, int dstRank,
                                                      int tag) {
  at::Tensor& t = p2pTensor(tensors, dstRank, tag, size_, "send", "destination");
  Buffer b = moveBuffer(t);
  return enqueue(
      c10d::OpType::SEND, "send", {}, {t},
      [this, b, dstRank](cudaStream_t s) {
        check(tcclSend(b.ptr, b.count, b.type, dstRank, comm_, s), "tcclSend");
      },
      "to " + std::to_string(dstRank));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::recv(std::vector<at::Tensor>& tensors, int srcRank,
                                                      int tag) {
  at::Tensor& t = p2pTensor(tensors, srcRank, tag, size_, "recv", "source");
  Buffer b = moveBuffer(t);
  auto work = enqueue(
      c10d::OpType::RECV, "recv", {t}, {},
      [this, b, srcRank](cudaStream_t s) {
        check(tcclRecv(b.ptr, b.count, b.type, srcRank, comm_, s), "tcclRecv");
      },
      "from " + std::to_string(srcRank));
  c10::static_intrusive_pointer_cast<WorkTccl>(work)->sourceRank_ = srcRank;
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::recvAnysource(std::vector<at::Tensor>&, int) {
  TCCL_TORCH_CHECK(false,
                   "tccl: recv from any source is not supported: tccl, like NCCL, receives "
                   "from a named peer only");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::barrier(const c10d::BarrierOptions&) {
  at::Tensor token = at::zeros({1}, at::TensorOptions().dtype(at::kByte));
  std::lock_guard<std::recursive_mutex> lock(callerMutex_);
#if TCCL_TORCH_CUDA
  // Read here, under the caller-side lock, not in the job (the worker thread).
  c10::optional<c10::cuda::CUDAStream> drain;
  if (usedCuda_) drain = stream_;
#endif
  return enqueue(
      c10d::OpType::BARRIER, "barrier", {}, {token},
      [=](cudaStream_t) mutable {
#if TCCL_TORCH_CUDA
        // A barrier also means "my earlier collectives are done", as ProcessGroupNCCL's (which
        // waits for its stream): drain the group stream before meeting the others.
        if (drain) drain->synchronize();
#endif
        check(tcclAllReduce(token.data_ptr(), token.data_ptr(), 1, tcclUint8, tcclSum, comm_,
                            nullptr),
              "tcclAllReduce (barrier)");
      },
      "1 byte on the host");
}

c10::intrusive_ptr<BackendBase> createProcessGroupTccl(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size,
                                                       std::chrono::milliseconds timeout) {
  return c10::make_intrusive<ProcessGroupTccl>(store, rank, size, timeout);
}

}  // namespace tccl_torch
