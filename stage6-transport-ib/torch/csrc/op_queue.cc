/**
 * op_queue.cc: the worker and watchdog loops (see op_queue.h).
 * Added in: stage 4.
 */
#include "op_queue.h"

#include <Python.h>
#include <c10/util/Exception.h>

#include <cstdio>
#include <stdexcept>

#include "torch_log.h"

namespace tccl_torch {

namespace {

// Runs fn with the GIL released when this thread holds it (the backend is destroyed from
// Python, holding it, or from C++, not holding it).
template <typename Fn>
void withoutGil(Fn fn) {
  if (Py_IsInitialized() && PyGILState_Check()) {
    PyThreadState* state = PyEval_SaveThread();
    fn();
    PyEval_RestoreThread(state);
  } else {
    fn();
  }
}

// The TCCL_TORCH_DEBUG line of a job that has run: done or FAILED, how long since it was
// queued, and how much of that it waited for the worker (started: when the worker took it).
void logJob(int rank, const WorkTccl& work, std::chrono::steady_clock::time_point started,
            const std::string& error) {
  if (!torchLogEnabled()) return;
  const auto now = std::chrono::steady_clock::now();
  using us = std::chrono::microseconds;
  torchLog(rank, "%s #%llu: %s in %lld us (%lld us in the queue)", work.name().c_str(),
           (unsigned long long)work.seq(), error.empty() ? "done" : "FAILED",
           (long long)std::chrono::duration_cast<us>(now - work.queuedAt).count(),
           (long long)std::chrono::duration_cast<us>(started - work.queuedAt).count());
}

}  // namespace

OpQueue::OpQueue(int rank, std::chrono::milliseconds timeout) : rank_(rank), timeout_(timeout) {
  worker_ = std::thread([this] { workerLoop(); });
  watchdog_ = std::thread([this] { watchdogLoop(); });
}

OpQueue::~OpQueue() { stop(); }

void OpQueue::push(c10::intrusive_ptr<WorkTccl> work, Job job) {
  std::lock_guard<std::mutex> lock(mutex_);
  TCCL_TORCH_CHECK(failure_.empty(), "tccl: ", work->name(),
                   " refused: this process group failed "
                   "earlier (",
                   failure_, "); create a new process group");
  TCCL_TORCH_CHECK(!stopping_, "tccl: ", work->name(), " refused: the process group is shut down");
  queue_.push_back(Entry{std::move(work), std::move(job)});
  workCv_.notify_one();
}

void OpQueue::setTimeout(std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_ = timeout;
}

std::string OpQueue::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

std::deque<OpQueue::Entry> OpQueue::failAllLocked(const std::string& message) {
  if (failure_.empty()) failure_ = message;
  std::deque<Entry> dropped;
  dropped.swap(queue_);
  return dropped;
}

void OpQueue::failEntries(std::deque<Entry>& entries, const std::string& message) {
  auto error = std::make_exception_ptr(std::runtime_error(message));
  for (Entry& e : entries) e.work->fail(error);
  entries.clear();
}

void OpQueue::workerLoop() {
  for (;;) {
    Entry e;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      workCv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {  // stopping, and nothing left to run
        workerDone_ = true;
        doneCv_.notify_all();
        return;
      }
      e = std::move(queue_.front());
      queue_.pop_front();
      running_ = e.work;
      runningSince_ = std::chrono::steady_clock::now();
    }
    // >>> exercise 4.3: the worker runs a job and settles its Work
    std::string error;
    try {
      e.job(*e.work);
    } catch (const c10::Error& ex) {
      error = ex.what_without_backtrace();
    } catch (const std::exception& ex) {
      error = ex.what();
    }
    logJob(rank_, *e.work, runningSince_, error);  // runningSince_: only this thread writes it
    std::deque<Entry> dropped;
    std::string failure;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      running_.reset();
      if (!error.empty()) {
        // tccl raised its communicator's abort flag with the error: nothing queued can succeed.
        dropped = failAllLocked(error);
        failure = failure_;
      }
    }
    // Outside the lock: completing runs the Future's callbacks (a Python then() takes the
    // GIL) and dropping jobs frees tensors (which may take the GIL too), while the Python
    // thread may be waiting for this lock in push() with the GIL held.
    if (error.empty()) {
      e.work->complete();
    } else {
      e.work->fail(std::make_exception_ptr(std::runtime_error(error)));
      failEntries(dropped, failure);
    }
    // <<< exercise 4.3
  }
}

void OpQueue::watchdogLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!dogStop_) {
    dogCv_.wait_for(lock, std::chrono::milliseconds(100));
    if (!running_ || running_->settled()) continue;
    const auto ran = std::chrono::steady_clock::now() - runningSince_;
    if (ran < timeout_) continue;
    const std::string message = "tccl: " + running_->name() + " (operation " +
                                std::to_string(running_->seq()) + " of this process group, rank " +
                                std::to_string(rank_) + ") timed out after " +
                                std::to_string(timeout_.count()) +
                                " ms: a peer never joined it, or died; the process "
                                "group is unusable";
    c10::intrusive_ptr<WorkTccl> late = running_;
    std::deque<Entry> dropped = failAllLocked(message);
    // Failing runs callbacks and frees tensors: not under the lock (see workerLoop).
    lock.unlock();
    std::fprintf(stderr, "tccl_torch [rank %d] WARN %s\n", rank_, message.c_str());
    late->fail(std::make_exception_ptr(std::runtime_error(message)));
    failEntries(dropped, message);
    late.reset();
    lock.lock();
    doneCv_.notify_all();  // stop() may be waiting for this job
  }
}

bool OpQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !worker_.joinable()) return true;
    stopping_ = true;  // no new jobs; the worker leaves once the queue is empty
    workCv_.notify_all();
  }
  // Wait, with the watchdog still on duty, until the worker has run (or failed) what was
  // queued and left, or sits in a job the watchdog has failed (a peer that never came).
  // The GIL is let go meanwhile: the worker may need it to free tensors.
  bool stuck = false;
  withoutGil([&] {
    std::unique_lock<std::mutex> lock(mutex_);
    doneCv_.wait(lock, [&] { return workerDone_ || (running_ && running_->settled()); });
    stuck = !workerDone_;
    dogStop_ = true;
    dogCv_.notify_all();
  });
  if (watchdog_.joinable()) withoutGil([this] { watchdog_.join(); });
  if (!worker_.joinable()) return true;
  if (stuck) {
    worker_.detach();
    return false;
  }
  withoutGil([this] { worker_.join(); });
  return true;
}

}  // namespace tccl_torch
