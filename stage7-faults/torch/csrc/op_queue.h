/**
 * op_queue.h: the backend's worker thread (one per process group) and its watchdog.
 *
 * What it is: every operation of a process group becomes a job on this queue, and one worker
 * thread runs the jobs in the order they were issued. That gives torch what it expects of a
 * backend:
 *  - Asynchrony on host tensors. A tccl call on host buffers returns when the data has moved,
 *    so made from the Python thread it would block it; DDP must keep computing gradients while
 *    a bucket is all-reduced. ProcessGroupGloo has worker threads for the same reason.
 *  - One order per process group. Collectives match across ranks by the order each rank issues
 *    them (as in NCCL); one thread calling tccl in issue order keeps that order, for host and
 *    CUDA tensors alike (a CUDA job only enqueues, so it takes microseconds).
 *  - The timeout. The watchdog thread wakes every 100 ms; if the running job has been inside
 *    tccl longer than the process group's timeout (a peer that never joins), it fails that
 *    Work and every queued one with a message naming the operation, and the queue refuses new
 *    jobs: the caller's wait() raises instead of hanging. ProcessGroupNCCL's watchdog does the
 *    same (and then aborts the communicator).
 *
 * Invariants:
 *  - Jobs run one at a time, in push order, on the worker thread only.
 *  - No Work is completed or failed, and no job is freed, while mutex_ is held: completing
 *    runs Future callbacks and freeing drops tensors, and either may take Python's GIL, which
 *    the Python thread holds while it waits for mutex_ in push(). stop() releases the GIL
 *    while it joins the threads, for the same reason.
 *  - After the first failure (a job threw: tccl returned an error, which also means the
 *    communicator aborted itself; or a timeout) every queued and later job fails at once with
 *    that first error: a broken communicator is never called again.
 *  - A job that the watchdog failed may still be blocked inside tccl. Its Work is already
 *    settled (work_tccl.h), so its late return changes nothing. stop() then does not wait for
 *    it: it detaches the thread, and the communicator is left to the process's exit. Unblocking
 *    it needs an abort that is safe while another thread is inside a call: chapter 7's subject.
 * NCCL counterpart: ProcessGroupNCCL's watchdog thread (ncclCommWatchdog / workCleanupLoop);
 *   ProcessGroupGloo's worker threads (runLoop).
 * Added in: stage 4.
 */
#ifndef TCCL_TORCH_OP_QUEUE_H_
#define TCCL_TORCH_OP_QUEUE_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "work_tccl.h"

namespace tccl_torch {

class OpQueue {
 public:
  /// A job runs its collective and returns; it throws to report a failure.
  using Job = std::function<void(WorkTccl&)>;

  OpQueue(int rank, std::chrono::milliseconds timeout);
  ~OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;

  /// Queues `job` for `work`. Raises (and queues nothing) once the queue has failed.
  void push(c10::intrusive_ptr<WorkTccl> work, Job job);
  void setTimeout(std::chrono::milliseconds timeout);
  /// Stops both threads after the queued jobs ran (or failed; the watchdog keeps timing them
  /// meanwhile). Returns false when the worker was stuck in a job the watchdog failed and had
  /// to be left behind (detached): then nothing the job uses may be freed (the caller leaks
  /// the communicator, and the job must not outlive what it captured; see close()).
  bool stop();
  /// Empty while healthy, else the first error's message.
  std::string failure() const;

 private:
  struct Entry {
    c10::intrusive_ptr<WorkTccl> work;
    Job job;
  };
  void workerLoop();
  void watchdogLoop();
  /// Records the first failure and takes every queued job out. Caller holds mutex_; the
  /// caller fails the returned entries (failEntries) after unlocking.
  std::deque<Entry> failAllLocked(const std::string& message);
  static void failEntries(std::deque<Entry>& entries, const std::string& message);

  const int rank_;
  mutable std::mutex mutex_;
  std::condition_variable workCv_;  // the worker waits for jobs
  std::condition_variable dogCv_;   // the watchdog sleeps on it (so stop() can wake it)
  std::condition_variable doneCv_;  // stop() waits on it for the worker to leave or be failed
  std::deque<Entry> queue_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<WorkTccl> running_;  // the job inside tccl now, if any
  std::chrono::steady_clock::time_point runningSince_;
  std::string failure_;
  bool stopping_ = false;    // stop() was called: no new jobs
  bool workerDone_ = false;  // the worker ran out of jobs after stop() and left
  bool dogStop_ = false;     // the watchdog's own stop, after the worker is done or stuck
  std::thread worker_;
  std::thread watchdog_;
};

}  // namespace tccl_torch

#endif  // TCCL_TORCH_OP_QUEUE_H_
