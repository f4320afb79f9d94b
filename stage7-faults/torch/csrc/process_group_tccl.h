/**
 * process_group_tccl.h: the torch.distributed backend "tccl": c10d's interface onto tccl.
 *
 * What it is: one object per process group. Its constructor creates a tccl communicator from
 * the group's c10d Store (rank 0 makes the unique id and publishes it, the others read it:
 * the Store does what MPI_Bcast does in the C++ examples). Each torch collective checks its
 * tensors, turns them into tccl buffers, and queues a job that calls tccl; it returns a
 * WorkTccl at once (work_tccl.h). The jobs run in issue order on the group's worker thread
 * (op_queue.h).
 *
 * How a torch call becomes tccl calls:
 *   allreduce / broadcast / reduce          tcclAllReduce / tcclBroadcast / tcclReduce, in place
 *   _allgather_base, _reduce_scatter_base   tcclAllGather / tcclReduceScatter on flat tensors
 *     (torch 2.x: all_gather_into_tensor, reduce_scatter_tensor)
 *   allgather, reduce_scatter, gather,      the same tccl call on a flat staging tensor, plus
 *   scatter (lists of tensors)              copies between it and the list (as ProcessGroupNCCL)
 *   alltoall_base (all_to_all_single)       tcclAlltoAll for equal splits; grouped
 *                                           tcclSend/tcclRecv by row offsets for uneven ones
 *   alltoall (lists)                        grouped tcclSend/tcclRecv, one pair per peer
 *   send / recv                             tcclSend / tcclRecv (tags other than 0 refused)
 *   allreduce_coalesced, and torch 2.x's    every call between start and end goes into one
 *   startCoalescing/endCoalescing           job inside tcclGroupStart/End (one launch)
 *   barrier                                 a 1-byte host all-reduce, after this process's GPU
 *                                           work on the group's stream is done
 *   BAND / BOR / BXOR (no tccl op)          all-gather, then reduce the rows locally
 *
 * CUDA tensors (ProcessGroupNCCL's stream discipline): the group has its own stream. At the
 * call, an event is recorded on the caller's current stream; the job makes the group stream
 * wait on it, issues the tccl call on the group stream and records the Work's end event there.
 * The tensors' storage is recorded on the group stream (recordStream), so the caching
 * allocator does not reuse it before the collective is done even if the caller drops them.
 *
 * Invariants: every process of the group issues the same collectives in the same order (as
 * with NCCL; mismatched calls hang until the timeout, then raise). A tensor argument error
 * raises in the caller's thread before anything is queued, so the group stays usable.
 * NCCL counterpart: torch/csrc/distributed/c10d/ProcessGroupNCCL.{hpp,cpp} in PyTorch.
 * Added in: stage 4.
 */
#ifndef TCCL_TORCH_PROCESS_GROUP_TCCL_H_
#define TCCL_TORCH_PROCESS_GROUP_TCCL_H_

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "op_queue.h"
#include "tccl.h"
#include "tensor_util.h"
#include "torch_compat.h"
#include "work_tccl.h"

namespace tccl_torch {

/// tcclGroupStart/End as a scope, so an exception between them still closes the group.
class GroupGuard {
 public:
  GroupGuard() : ok_(tcclGroupStart() == tcclSuccess) {}
  ~GroupGuard() {
    if (ok_ && !ended_) (void)tcclGroupEnd();
  }
  GroupGuard(const GroupGuard&) = delete;
  GroupGuard& operator=(const GroupGuard&) = delete;
  tcclResult_t end() {
    ended_ = true;
    return tcclGroupEnd();
  }
  bool ok() const { return ok_; }

 private:
  bool ok_;
  bool ended_ = false;
};

class ProcessGroupTccl : public BackendBase {
 public:
  ProcessGroupTccl(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout);
  ~ProcessGroupTccl() override;

  const std::string getBackendName() const override { return "tccl"; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  void startCoalescing() override { beginCoalescing(); }
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { return finishCoalescing(); }
  void setTimeout(std::chrono::milliseconds timeout) override { queue_->setTimeout(timeout); }
  void shutdown() override { close(); }
#endif

  /// Stops the worker and frees the communicator (destroy when healthy, abort after a
  /// failure). Idempotent; the destructor calls it.
  void close();

 private:
  /// Issues the tccl calls of one operation (and the staging copies before them); `stream` is
  /// the group stream for CUDA tensors, null for host tensors. Runs on the worker thread.
  using Body = std::function<void(cudaStream_t stream)>;
  /// What must wait for the tccl calls' data: copies out of a staging tensor, the local step
  /// of a bitwise reduction. Inside a coalesced group it runs after tcclGroupEnd, when the
  /// data has arrived (host) or is ordered after the collective (CUDA, same stream).
  using Finish = std::function<void()>;

  /// Makes the Work and queues `body` then `finish` (or, between beginCoalescing and
  /// finishCoalescing, keeps them for the coalesced job). `outputs` are the Work's result;
  /// `inputs` (and staging tensors) are kept alive.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* name,
                                         std::vector<at::Tensor> outputs,
                                         std::vector<at::Tensor> inputs, Body body,
                                         const std::string& detail, Finish finish = nullptr);
  /// The Work of one operation: its number, device, CUDA events and kept tensors.
  c10::intrusive_ptr<WorkTccl> makeWork(c10d::OpType type, const char* name,
                                        std::vector<at::Tensor> outputs,
                                        std::vector<at::Tensor> inputs, const std::string& detail);
  void beginCoalescing();
  /// beginCoalescing, issue() (the members' calls), finishCoalescing: one Work for all.
  c10::intrusive_ptr<c10d::Work> coalesced(const std::function<void()>& issue);
  c10::intrusive_ptr<c10d::Work> finishCoalescing();

  /// The all-reduce of `in` into `out` (same shape, `r` made for them), queued. A bitwise op
  /// all-gathers into a staging tensor and reduces its rows in the Finish step; `keepOut`
  /// (when set) receives the reduced rows instead of `out` being written on every rank.
  c10::intrusive_ptr<c10d::Work> queueAllReduce(c10d::OpType type, const char* name, at::Tensor in,
                                                at::Tensor out, Reduction r,
                                                const std::string& detail);
  /// Reduce-scatter with a bitwise op: all-gather `flat` ([size x out]) and keep my block.
  c10::intrusive_ptr<c10d::Work> bitwiseReduceScatter(const at::Tensor& flat, at::Tensor out,
                                                      Reduction r, const char* name,
                                                      const std::string& detail);
  /// Reduce-family calls that tccl can do natively (all-reduce, reduce, reduce-scatter) share
  /// the premulsum bracket: create the op, issue, destroy it, check.
  void reduceCall(Reduction& r, const std::function<tcclResult_t()>& call, const char* what);
  /// Raises a c10::Error naming the call, tccl's error string and its last message.
  void check(tcclResult_t res, const char* call) const;

  // CUDA halves of a job (no-ops for host tensors): make the group stream wait on the call's
  // start event, then (after the tccl calls) record the end event there.
  void beginOnStream(WorkTccl& work);
  void endOnStream(WorkTccl& work);

  tcclComm_t comm_ = nullptr;
  std::unique_ptr<OpQueue> queue_;
  // The caller-side state below (numbering, the group stream, coalescing) is guarded by this
  // lock: torch may call a backend from more than one thread (DDP's hooks run on autograd's
  // threads). Recursive: barrier and the coalesced collectives enqueue from inside a locked
  // call. Issue order across threads is the order they take the lock.
  std::recursive_mutex callerMutex_;
  uint64_t seq_ = 0;  // operations issued (the Work's number in logs and errors)
  bool closed_ = false;
  bool usedCuda_ = false;  // a CUDA op was issued: barrier must drain the group stream
#if TCCL_TORCH_CUDA
  c10::optional<c10::cuda::CUDAStream> stream_;
#endif
  // Coalescing: the operations issued between beginCoalescing and finishCoalescing.
  struct Pending {
    c10::intrusive_ptr<WorkTccl> work;
    Body body;
    Finish finish;
  };
  bool coalescing_ = false;
  std::vector<Pending> coalesced_;
};

/// The creator torch calls for dist.init_process_group("tccl") and dist.new_group.
c10::intrusive_ptr<BackendBase> createProcessGroupTccl(const c10::intrusive_ptr<c10d::Store>& store,
                                                       int rank, int size,
                                                       std::chrono::milliseconds timeout);

}  // namespace tccl_torch

#endif  // TCCL_TORCH_PROCESS_GROUP_TCCL_H_
