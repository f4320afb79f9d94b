/*
 * fiber.cc: Fiber on ucontext, with the sanitizers' fiber annotations. See fiber.h.
 *
 * Added in: stage 3 (the host fast path).
 */
#include "fiber.h"

#include <sys/mman.h>

#include <cstdint>

#include "tccl/common/debug.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TCCL_FIBER_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define TCCL_FIBER_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(TCCL_FIBER_ASAN)
#define TCCL_FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(TCCL_FIBER_TSAN)
#define TCCL_FIBER_TSAN 1
#endif

#if defined(TCCL_FIBER_ASAN)
extern "C" void __sanitizer_start_switch_fiber(void** fakeStackSave, const void* bottom,
                                               size_t size);
extern "C" void __sanitizer_finish_switch_fiber(void* fakeStackSave, const void** bottomOld,
                                                size_t* sizeOld);
#endif
#if defined(TCCL_FIBER_TSAN)
extern "C" void* __tsan_get_current_fiber(void);
extern "C" void* __tsan_create_fiber(unsigned flags);
extern "C" void __tsan_destroy_fiber(void* fiber);
extern "C" void __tsan_switch_to_fiber(void* fiber, unsigned flags);
#endif

namespace tccl {

namespace {
thread_local Fiber* tCurrent = nullptr;
}

Fiber::~Fiber() {
  // Only a finished (or never started) fiber is destroyed: its stack holds no live frame
  // that matters, only the entry loop parked in switchOut().
  if (mapping_ != nullptr) munmap(mapping_, kGuardBytes + kStackBytes);
#if defined(TCCL_FIBER_TSAN)
  if (tsanFiber_ != nullptr) __tsan_destroy_fiber(tsanFiber_);
#endif
}

tcclResult_t Fiber::start(std::function<void()> fn) {
  fn_ = std::move(fn);
  finished_ = false;
  if (mapping_ != nullptr) return tcclSuccess;  // the entry loop picks fn_ up on resume()
  // First use: a stack with a guard page below it (stacks grow down).
  mapping_ = mmap(nullptr, kGuardBytes + kStackBytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping_ == MAP_FAILED) {
    mapping_ = nullptr;
    finished_ = true;
    TCCL_WARN("fiber: cannot map a %zu-byte stack", kStackBytes);
    return tcclSystemError;
  }
  if (mprotect(mapping_, kGuardBytes, PROT_NONE) != 0 || getcontext(&context_) != 0) {
    TCCL_WARN("fiber: cannot set up a stack (guard page or context)");
    // Unmapped again, so that a later start() retries instead of resuming a half-made fiber.
    munmap(mapping_, kGuardBytes + kStackBytes);
    mapping_ = nullptr;
    finished_ = true;
    return tcclSystemError;
  }
  context_.uc_stack.ss_sp = static_cast<char*>(mapping_) + kGuardBytes;
  context_.uc_stack.ss_size = kStackBytes;
  context_.uc_link = nullptr;  // entry() never returns
  // makecontext passes int arguments only: the pointer travels as two halves.
  const uintptr_t self = reinterpret_cast<uintptr_t>(this);
  makecontext(&context_, reinterpret_cast<void (*)()>(&Fiber::entry), 2,
              unsigned(self >> 32), unsigned(self & 0xffffffffu));
#if defined(TCCL_FIBER_TSAN)
  tsanFiber_ = __tsan_create_fiber(0);
#endif
  return tcclSuccess;
}

bool Fiber::resume() {
  if (finished_) return true;
  Fiber* outer = tCurrent;  // fibers do not nest in tccl, but keep the chain honest
  tCurrent = this;
  switchIn();
  tCurrent = outer;
  return finished_;
}

void Fiber::yield() {
  Fiber* self = tCurrent;
  if (self != nullptr) self->switchOut();
}

Fiber* Fiber::current() { return tCurrent; }

void Fiber::entry(unsigned hi, unsigned lo) {
  Fiber* self = reinterpret_cast<Fiber*>((uintptr_t(hi) << 32) | uintptr_t(lo));
#if defined(TCCL_FIBER_ASAN)
  // First arrival on this stack: learn the resumer's stack, to switch back to it.
  __sanitizer_finish_switch_fiber(nullptr, &self->callerStackBottom_, &self->callerStackSize_);
#endif
  // A fiber is reused for batch after batch: run, report, park, and run the next fn_.
  for (;;) {
    self->fn_();
    self->fn_ = nullptr;  // drop captures now, not at the next start()
    self->finished_ = true;
    self->switchOut();
  }
}

void Fiber::switchIn() {
#if defined(TCCL_FIBER_ASAN)
  void* fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, static_cast<char*>(mapping_) + kGuardBytes, kStackBytes);
#endif
#if defined(TCCL_FIBER_TSAN)
  tsanCaller_ = __tsan_get_current_fiber();
  __tsan_switch_to_fiber(tsanFiber_, 0);
#endif
  swapcontext(&caller_, &context_);  // returns when the fiber yields or finishes
#if defined(TCCL_FIBER_ASAN)
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
}

void Fiber::switchOut() {
#if defined(TCCL_FIBER_ASAN)
  __sanitizer_start_switch_fiber(&asanFakeStack_, callerStackBottom_, callerStackSize_);
#endif
#if defined(TCCL_FIBER_TSAN)
  __tsan_switch_to_fiber(tsanCaller_, 0);
#endif
  swapcontext(&context_, &caller_);  // returns at the next resume()
#if defined(TCCL_FIBER_ASAN)
  __sanitizer_finish_switch_fiber(asanFakeStack_, &callerStackBottom_, &callerStackSize_);
#endif
}

}  // namespace tccl
