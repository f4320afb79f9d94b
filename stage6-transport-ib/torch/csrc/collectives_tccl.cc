/**
 * collectives_tccl.cc: torch's collectives, each as tccl calls (the table in
 * process_group_tccl.h). Every function checks its tensors in the caller's thread, then queues
 * a body that runs on the worker thread with the group stream (CUDA) or none (host).
 *
 * Invariants: a body captures tensors by value (shared storage), so the memory it touches is
 * alive while it runs; staging tensors are made in the caller's thread, on the tensors'
 * device, and copied to or from on the group stream (the body runs under a stream guard).
 * NCCL counterpart: ProcessGroupNCCL::allreduce, allgather, ... (each a collective() call
 *   wrapping one nccl* call) in PyTorch's ProcessGroupNCCL.cpp.
 * Added in: stage 4.
 */
#include <c10/util/Exception.h>

#include <numeric>

#include "process_group_tccl.h"

namespace tccl_torch {

namespace {

std::string describe(const at::Tensor& t, const char* op = nullptr) {
  std::string s = std::to_string(t.numel()) + " x " + c10::toString(t.scalar_type());
  if (op != nullptr) s += std::string(", ") + op;
  return s;
}

// The flat staging tensor of `n` tensors shaped like `like`.
at::Tensor staging(const at::Tensor& like, int64_t n) {
  return at::empty({n * like.numel()}, like.options());
}

at::Tensor slice(const at::Tensor& flat, int64_t i, const at::Tensor& like) {
  return flat.narrow(0, i * like.numel(), like.numel()).view(like.sizes());
}

// The tensors a reduction reads besides its buffers: a PREMUL_SUM factor on the GPU is read by
// the kernel when it runs, so the Work keeps it alive and records the group stream on it.
std::vector<at::Tensor> withFactor(std::vector<at::Tensor> inputs, const Reduction& r) {
  if (r.factor.defined()) inputs.push_back(r.factor);
  return inputs;
}

void checkRoot(int root, int size, const char* what) {
  TCCL_TORCH_CHECK(root >= 0 && root < size, "tccl: ", what, ": root rank ", root,
                   " is not in [0, ", size, ")");
}

}  // namespace

void ProcessGroupTccl::reduceCall(Reduction& r, const std::function<tcclResult_t()>& call,
                                  const char* what) {
  check(makeRedOp(r, comm_), "tcclRedOpCreatePreMulSum");
  const tcclResult_t res = call();
  dropRedOp(r, comm_);  // tccl, like NCCL, keeps the op alive for the call already issued
  check(res, what);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::queueAllReduce(c10d::OpType type, const char* name,
                                                                at::Tensor in, at::Tensor out,
                                                                Reduction r,
                                                                const std::string& detail) {
  if (r.bitwise) {
    // No tccl (or NCCL) op for bitwise reductions: gather every rank's bits, reduce here.
    at::Tensor rows = at::empty({int64_t(size_), in.numel()}, in.options());
    Buffer b = moveBuffer(in);
    return enqueue(
        type, name, {out}, {in, rows},
        [this, b, rows](cudaStream_t s) {
          check(tcclAllGather(b.ptr, rows.data_ptr(), b.count, b.type, comm_, s),
                "tcclAllGather (bitwise all-reduce)");
        },
        detail, [this, rows, r, out]() mutable { bitwiseReduceRows(rows, size_, r.kind, out); });
  }
  return enqueue(
      type, name, {out}, withFactor({in}, r),
      [this, in, out, r](cudaStream_t s) mutable {
        reduceCall(
            r,
            [&] {
              return tcclAllReduce(in.data_ptr(), out.data_ptr(), r.buf.count, r.buf.type, r.op,
                                   comm_, s);
            },
            "tcclAllReduce");
      },
      detail);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::bitwiseReduceScatter(const at::Tensor& flat,
                                                                      at::Tensor out, Reduction r,
                                                                      const char* name,
                                                                      const std::string& detail) {
  at::Tensor rows = at::empty({int64_t(size_), flat.numel()}, flat.options());
  Buffer b = moveBuffer(flat);
  return enqueue(
      c10d::OpType::REDUCE_SCATTER, name, {out}, {flat, rows},
      [this, b, rows](cudaStream_t s) {
        check(tcclAllGather(b.ptr, rows.data_ptr(), b.count, b.type, comm_, s),
              "tcclAllGather (bitwise reduce-scatter)");
      },
      detail,
      [this, rows, r, out]() mutable {
        at::Tensor all = at::empty({rows.size(1)}, rows.options());
        bitwiseReduceRows(rows, size_, r.kind, all);
        out.copy_(slice(all, rank_, out));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::allreduce(std::vector<at::Tensor>& tensors,
                                                           const c10d::AllreduceOptions& opts) {
  at::Tensor t = singleTensor(tensors, "allreduce");
  Reduction r = reduction(t, opts.reduceOp, "allreduce");
  return queueAllReduce(c10d::OpType::ALLREDUCE, "allreduce", t, t, r,
                        describe(t, reduceOpName(r.kind)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TCCL_TORCH_CHECK(!tensors.empty(), "tccl: allreduce_coalesced: no tensors");
  for (const at::Tensor& t : tensors) checkTensor(t, "allreduce_coalesced");
  // One group: every all-reduce is planned and launched together (one tcclGroupEnd).
  return coalesced([&] {
    for (at::Tensor& t : tensors) {
      std::vector<at::Tensor> one{t};
      allreduce(one, opts);
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::broadcast(std::vector<at::Tensor>& tensors,
                                                           const c10d::BroadcastOptions& opts) {
  at::Tensor t = singleTensor(tensors, "broadcast");
  checkRoot(int(opts.rootRank), size_, "broadcast");
  TCCL_TORCH_CHECK(opts.rootTensor == 0,
                   "tccl: broadcast: rootTensor must be 0 (one tensor per "
                   "process)");
  const int root = int(opts.rootRank);
  Buffer b = moveBuffer(t);
  return enqueue(
      c10d::OpType::BROADCAST, "broadcast", {t}, {},
      [this, b, root](cudaStream_t s) {
        check(tcclBroadcast(b.ptr, b.ptr, b.count, b.type, root, comm_, s), "tcclBroadcast");
      },
      describe(t) + ", root " + std::to_string(root));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::reduce(std::vector<at::Tensor>& tensors,
                                                        const c10d::ReduceOptions& opts) {
  at::Tensor t = singleTensor(tensors, "reduce");
  checkRoot(int(opts.rootRank), size_, "reduce");
  const int root = int(opts.rootRank);
  Reduction r = reduction(t, opts.reduceOp, "reduce");
  const std::string detail = describe(t, reduceOpName(r.kind)) + ", root " + std::to_string(root);
  if (r.bitwise) {
    // Every rank computes the bitwise result; only the root's tensor receives it.
    at::Tensor result = rank_ == root ? t : at::empty_like(t);
    return queueAllReduce(c10d::OpType::REDUCE, "reduce", t, result, r, detail);
  }
  return enqueue(
      c10d::OpType::REDUCE, "reduce", {t}, withFactor({}, r),
      [this, t, r, root](cudaStream_t s) mutable {
        reduceCall(
            r,
            [&] {
              return tcclReduce(t.data_ptr(), t.data_ptr(), r.buf.count, r.buf.type, r.op, root,
                                comm_, s);
            },
            "tcclReduce");
      },
      detail);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::_allgather_base(at::Tensor& output,
                                                                 at::Tensor& input,
                                                                 const c10d::AllgatherOptions&) {
  checkTensor(input, "all_gather_into_tensor (input)");
  checkTensor(output, "all_gather_into_tensor (output)");
  TCCL_TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.device() == input.device(),
                   "tccl: all_gather_into_tensor: output and input differ in dtype or device");
  TCCL_TORCH_CHECK(output.numel() == input.numel() * size_,
                   "tccl: all_gather_into_tensor: output "
                   "has ",
                   output.numel(), " elements, expected ", size_, " x ", input.numel());
  Buffer in = moveBuffer(input);
  void* out = output.data_ptr();
  return enqueue(
      c10d::OpType::_ALLGATHER_BASE, "all_gather_into_tensor", {output}, {input},
      [this, in, out](cudaStream_t s) {
        check(tcclAllGather(in.ptr, out, in.count, in.type, comm_, s), "tcclAllGather");
      },
      describe(input));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions&) {
  at::Tensor in = singleTensor(inputs, "allgather");
  TCCL_TORCH_CHECK(outputs.size() == 1, "tccl: allgather: expected one output list, got ",
                   outputs.size());
  std::vector<at::Tensor> outs = outputs[0];
  TCCL_TORCH_CHECK(int(outs.size()) == size_, "tccl: allgather: the output list has ", outs.size(),
                   " tensors, expected one per rank (", size_, ")");
  checkSameShape(outs, in, "allgather (output list)");
  at::Tensor flat = staging(in, size_);
  Buffer b = moveBuffer(in);
  return enqueue(
      c10d::OpType::ALLGATHER, "allgather", outs, {in, flat},
      [this, b, flat](cudaStream_t s) {
        check(tcclAllGather(b.ptr, flat.data_ptr(), b.count, b.type, comm_, s), "tcclAllGather");
      },
      describe(in),
      [this, flat, outs, in]() mutable {
        for (int i = 0; i < size_; i++) outs[i].copy_(slice(flat, i, in));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TCCL_TORCH_CHECK(outputLists.size() == inputs.size(),
                   "tccl: allgather_coalesced: ", outputLists.size(), " output lists for ",
                   inputs.size(), " inputs");
  return coalesced([&] {
    for (size_t i = 0; i < inputs.size(); i++) {
      std::vector<std::vector<at::Tensor>> out{outputLists[i]};
      std::vector<at::Tensor> in{inputs[i]};
      allgather(out, in, opts);
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  checkTensor(input, "reduce_scatter_tensor (input)");
  checkTensor(output, "reduce_scatter_tensor (output)");
  TCCL_TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.device() == input.device(),
                   "tccl: reduce_scatter_tensor: output and input differ in dtype or device");
  TCCL_TORCH_CHECK(input.numel() == output.numel() * size_,
                   "tccl: reduce_scatter_tensor: input has ", input.numel(), " elements, expected ",
                   size_, " x ", output.numel());
  Reduction r = reduction(output, opts.reduceOp, "reduce_scatter_tensor");
  const std::string detail = describe(output, reduceOpName(r.kind));
  if (r.bitwise) return bitwiseReduceScatter(input, output, r, "reduce_scatter_tensor", detail);
  return enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, "reduce_scatter_tensor", {output}, withFactor({input}, r),
      [this, input, output, r](cudaStream_t s) mutable {
        reduceCall(
            r,
            [&] {
              return tcclReduceScatter(input.data_ptr(), output.data_ptr(), r.buf.count, r.buf.type,
                                       r.op, comm_, s);
            },
            "tcclReduceScatter");
      },
      detail);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  at::Tensor out = singleTensor(outputs, "reduce_scatter");
  TCCL_TORCH_CHECK(inputs.size() == 1, "tccl: reduce_scatter: expected one input list, got ",
                   inputs.size());
  std::vector<at::Tensor> ins = inputs[0];
  TCCL_TORCH_CHECK(int(ins.size()) == size_, "tccl: reduce_scatter: the input list has ",
                   ins.size(), " tensors, expected one per rank (", size_, ")");
  checkSameShape(ins, out, "reduce_scatter (input list)");
  at::Tensor flat = staging(out, size_);
  Reduction r = reduction(out, opts.reduceOp, "reduce_scatter");
  const std::string detail = describe(out, reduceOpName(r.kind));
  // The list is copied into the flat tensor here, in the caller's thread but on the caller's
  // stream (CUDA), so the copy sees what the caller wrote before the call.
  for (int i = 0; i < size_; i++) slice(flat, i, out).copy_(ins[i]);
  if (r.bitwise) return bitwiseReduceScatter(flat, out, r, "reduce_scatter", detail);
  return enqueue(
      c10d::OpType::REDUCE_SCATTER, "reduce_scatter", {out}, withFactor({flat}, r),
      [this, flat, out, r](cudaStream_t s) mutable {
        reduceCall(
            r,
            [&] {
              return tcclReduceScatter(flat.data_ptr(), out.data_ptr(), r.buf.count, r.buf.type,
                                       r.op, comm_, s);
            },
            "tcclReduceScatter");
      },
      detail);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  at::Tensor in = singleTensor(inputs, "gather");
  checkRoot(int(opts.rootRank), size_, "gather");
  const int root = int(opts.rootRank);
  std::vector<at::Tensor> outs;
  if (rank_ == root) {
    TCCL_TORCH_CHECK(outputs.size() == 1 && int(outputs[0].size()) == size_,
                     "tccl: gather: the root "
                     "needs one output list of ",
                     size_, " tensors");
    outs = outputs[0];
    checkSameShape(outs, in, "gather (output list)");
  } else {
    TCCL_TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                     "tccl: gather: "
                     "only the root (rank ",
                     root, ") takes an output list");
  }
  at::Tensor flat = rank_ == root ? staging(in, size_) : at::Tensor();
  Buffer b = moveBuffer(in);
  std::vector<at::Tensor> keep{in};
  if (flat.defined()) keep.push_back(flat);
  return enqueue(
      c10d::OpType::GATHER, "gather", outs, keep,
      [this, b, flat, root](cudaStream_t s) {
        check(tcclGather(b.ptr, flat.defined() ? flat.data_ptr() : nullptr, b.count, b.type, root,
                         comm_, s),
              "tcclGather");
      },
      describe(in) + ", root " + std::to_string(root),
      [flat, outs, in]() mutable {
        for (size_t i = 0; i < outs.size(); i++) outs[i].copy_(slice(flat, int64_t(i), in));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  at::Tensor out = singleTensor(outputs, "scatter");
  checkRoot(int(opts.rootRank), size_, "scatter");
  const int root = int(opts.rootRank);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    TCCL_TORCH_CHECK(inputs.size() == 1 && int(inputs[0].size()) == size_,
                     "tccl: scatter: the root "
                     "needs one input list of ",
                     size_, " tensors");
    ins = inputs[0];
    checkSameShape(ins, out, "scatter (input list)");
  } else {
    TCCL_TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                     "tccl: scatter: "
                     "only the root (rank ",
                     root, ") takes an input list");
  }
  at::Tensor flat = rank_ == root ? staging(out, size_) : at::Tensor();
  Buffer b = moveBuffer(out);
  std::vector<at::Tensor> keep = ins;
  if (flat.defined()) keep.push_back(flat);
  // Staged here, on the caller's stream (CUDA): the copy sees what the caller wrote.
  for (size_t i = 0; i < ins.size(); i++) slice(flat, int64_t(i), out).copy_(ins[i]);
  std::vector<at::Tensor> outList{out};
  return enqueue(
      c10d::OpType::SCATTER, "scatter", outList, keep,
      [this, b, flat, root](cudaStream_t s) {
        check(tcclScatter(flat.defined() ? flat.data_ptr() : nullptr, b.ptr, b.count, b.type, root,
                          comm_, s),
              "tcclScatter");
      },
      describe(out) + ", root " + std::to_string(root));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::alltoall_base(at::Tensor& output,
                                                               at::Tensor& input,
                                                               std::vector<int64_t>& outputSplits,
                                                               std::vector<int64_t>& inputSplits,
                                                               const c10d::AllToAllOptions&) {
  checkTensor(input, "all_to_all_single (input)");
  checkTensor(output, "all_to_all_single (output)");
  TCCL_TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.device() == input.device(),
                   "tccl: all_to_all_single: output and input differ in dtype or device");
  if (outputSplits.empty() && inputSplits.empty()) {
    TCCL_TORCH_CHECK(input.numel() % size_ == 0 && output.numel() == input.numel(),
                     "tccl: "
                     "all_to_all_single: equal splits need input and output of the same size, a "
                     "multiple of ",
                     size_, " (got ", input.numel(), " and ", output.numel(), ")");
    Buffer in = moveBuffer(input);
    void* out = output.data_ptr();
    const size_t per = in.count / size_t(size_);
    return enqueue(
        c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output}, {input},
        [this, in, out, per](cudaStream_t s) {
          check(tcclAlltoAll(in.ptr, out, per, in.type, comm_, s), "tcclAlltoAll");
        },
        describe(input) + ", equal splits");
  }
  // >>> exercise 4.2: all-to-all with uneven splits
  // Uneven splits count rows of dim 0; a row is the product of the other dims.
  auto rowsOf = [&](const at::Tensor& t, std::vector<int64_t>& splits, const char* which) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (splits.empty()) splits.assign(size_t(size_), rows / size_);
    TCCL_TORCH_CHECK(int(splits.size()) == size_, "tccl: all_to_all_single: ", which,
                     " splits have ", splits.size(), " entries, expected ", size_);
    TCCL_TORCH_CHECK(std::accumulate(splits.begin(), splits.end(), int64_t(0)) == rows,
                     "tccl: all_to_all_single: ", which, " splits do not add up to dim 0 (", rows,
                     ")");
    for (int64_t v : splits) {
      TCCL_TORCH_CHECK(v >= 0, "tccl: all_to_all_single: negative ", which, " split");
    }
    return rows;
  };
  const int64_t inRows = rowsOf(input, inputSplits, "input");
  const int64_t outRows = rowsOf(output, outputSplits, "output");
  const size_t inRowBytes = inRows ? size_t(input.nbytes()) / size_t(inRows) : 0;
  const size_t outRowBytes = outRows ? size_t(output.nbytes()) / size_t(outRows) : 0;
  std::vector<size_t> sendOff, sendLen, recvOff, recvLen;
  size_t so = 0, ro = 0;
  for (int p = 0; p < size_; p++) {
    sendOff.push_back(so);
    sendLen.push_back(size_t(inputSplits[p]) * inRowBytes);
    so += sendLen.back();
    recvOff.push_back(ro);
    recvLen.push_back(size_t(outputSplits[p]) * outRowBytes);
    ro += recvLen.back();
  }
  auto* in = static_cast<char*>(input.data_ptr());
  auto* out = static_cast<char*>(output.data_ptr());
  return enqueue(
      c10d::OpType::ALLTOALL_BASE, "all_to_all_single", {output}, {input},
      [this, in, out, sendOff, sendLen, recvOff, recvLen](cudaStream_t s) {
        // One group, so every rank posts all its sends and receives before any must complete
        // (otherwise two ranks sending to each other first would wait forever).
        GroupGuard guard;
        check(guard.ok() ? tcclSuccess : tcclInternalError, "tcclGroupStart");
        for (int p = 0; p < size_; p++) {
          if (sendLen[p])
            check(tcclSend(in + sendOff[p], sendLen[p], tcclUint8, p, comm_, s), "tcclSend");
          if (recvLen[p])
            check(tcclRecv(out + recvOff[p], recvLen[p], tcclUint8, p, comm_, s), "tcclRecv");
        }
        check(guard.end(), "tcclGroupEnd");
      },
      describe(input) + ", uneven splits");
  // <<< exercise 4.2
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::alltoall(std::vector<at::Tensor>& outputs,
                                                          std::vector<at::Tensor>& inputs,
                                                          const c10d::AllToAllOptions&) {
  TCCL_TORCH_CHECK(int(outputs.size()) == size_ && int(inputs.size()) == size_,
                   "tccl: all_to_all: "
                   "expected ",
                   size_, " input and output tensors, got ", inputs.size(), " and ",
                   outputs.size());
  for (int p = 0; p < size_; p++) {
    checkTensor(inputs[p], "all_to_all (input)");
    checkTensor(outputs[p], "all_to_all (output)");
    TCCL_TORCH_CHECK(
        inputs[p].device() == inputs[0].device() && outputs[p].device() == inputs[0].device(),
        "tccl: all_to_all: all tensors must be on one device");
  }
  std::vector<at::Tensor> ins = inputs, outs = outputs;
  return enqueue(
      c10d::OpType::ALLTOALL, "all_to_all", outs, ins,
      [this, ins, outs](cudaStream_t s) {
        GroupGuard guard;
        check(guard.ok() ? tcclSuccess : tcclInternalError, "tcclGroupStart");
        for (int p = 0; p < size_; p++) {
          Buffer sb = moveBuffer(ins[p]), rb = moveBuffer(outs[p]);
          if (sb.count) check(tcclSend(sb.ptr, sb.count, sb.type, p, comm_, s), "tcclSend");
          if (rb.count) check(tcclRecv(rb.ptr, rb.count, rb.type, p, comm_, s), "tcclRecv");
        }
        check(guard.end(), "tcclGroupEnd");
      },
      std::to_string(size_) + " tensors each way");
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  TCCL_TORCH_CHECK(outputs.size() == inputs.size(),
                   "tccl: allgather_into_tensor_coalesced: ", outputs.size(), " outputs for ",
                   inputs.size(), " inputs");
  return coalesced([&] {
    for (size_t i = 0; i < inputs.size(); i++) _allgather_base(outputs[i], inputs[i], opts);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupTccl::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  TCCL_TORCH_CHECK(outputs.size() == inputs.size(),
                   "tccl: reduce_scatter_tensor_coalesced: ", outputs.size(), " outputs for ",
                   inputs.size(), " inputs");
  return coalesced([&] {
    for (size_t i = 0; i < inputs.size(); i++) _reduce_scatter_base(outputs[i], inputs[i], opts);
  });
}
#endif

}  // namespace tccl_torch
