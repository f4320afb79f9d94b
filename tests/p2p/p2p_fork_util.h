/*
 * tests/p2p/p2p_fork_util.h: running tccl ranks as forked child processes from a GoogleTest.
 *
 * What it is: the plumbing shared by the tests that need real, separate processes but no
 * mpirun (a peer killed with SIGKILL, ranks in two network namespaces): a free TCP port for
 * TCCL_COMM_ID, fork() of a child that runs a function and _exit()s with its result, a pipe to
 * report small records back, and waits with deadlines so the test process itself can never hang.
 *
 * Invariants: the test process makes no tccl call (tcclGetErrorString aside: it reads no
 * state), because tccl reads its environment knobs once per process and a forked child must
 * start from a clean library; each child only _exit()s, never returns into GoogleTest; every
 * wait has a deadline and a child that misses it is killed.
 *
 * NCCL counterpart: none (NCCL's own tests use MPI); nccl-tests has no fault tests.
 * Added in: stage 1.
 */
#ifndef TCCL_TESTS_P2P_P2P_FORK_UTIL_H_
#define TCCL_TESTS_P2P_P2P_FORK_UTIL_H_

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

namespace tccl {
namespace test {
namespace p2p {

/// A TCP port that was free on 127.0.0.1 a moment ago (bind to port 0, read it back, close).
inline int freeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

/// A one-way pipe from a child to the test process.
struct Pipe {
  int rd = -1, wr = -1;
  Pipe() {
    int fds[2];
    if (::pipe(fds) == 0) {
      rd = fds[0];
      wr = fds[1];
    }
  }
  ~Pipe() {
    if (rd >= 0) ::close(rd);
    if (wr >= 0) ::close(wr);
  }
  /// Child side: writes a whole record (a pipe write of <= PIPE_BUF bytes is atomic).
  void put(const void* p, size_t n) const {
    ssize_t r;
    do r = ::write(wr, p, n);
    while (r < 0 && errno == EINTR);
  }
  /// Parent side: reads exactly n bytes within `seconds`. False on timeout or EOF.
  bool get(void* p, size_t n, double seconds) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    size_t got = 0;
    while (got < n) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                      deadline - std::chrono::steady_clock::now())
                      .count();
      if (left <= 0) return false;
      pollfd pfd{rd, POLLIN, 0};
      int r = ::poll(&pfd, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      ssize_t k = ::read(rd, static_cast<char*>(p) + got, n - got);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) return false;
      got += static_cast<size_t>(k);
    }
    return true;
  }
};

/// Forks a child that runs `body` and _exit()s with its return value (0..255).
inline pid_t forkChild(const std::function<int()>& body) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 100;
    try {
      rc = body();
    } catch (...) {
      rc = 101;
    }
    ::_exit(rc);
  }
  return pid;
}

/// How a child ended, in words ("exit 0", "signal 9 (Killed)", "still running").
struct ChildEnd {
  bool exited = false;  // normal exit
  int code = -1;        // exit code, or signal number when !exited
  bool timedOut = false;
  std::string describe() const {
    if (timedOut) return "did not end in time (killed)";
    if (exited) return "exit " + std::to_string(code);
    return "signal " + std::to_string(code) + " (" + strsignal(code) + ")";
  }
};

/// Waits for `pid` for up to `seconds`; kills it with SIGKILL past the deadline.
inline ChildEnd waitChild(pid_t pid, double seconds) {
  ChildEnd end;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  for (;;) {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      end.exited = WIFEXITED(status);
      end.code = end.exited ? WEXITSTATUS(status) : WTERMSIG(status);
      return end;
    }
    if (r < 0) return end;  // not our child any more
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      end.timedOut = true;
      return end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

/// A forked child that is killed and reaped when the test leaves its scope early (a failed
/// ASSERT), so no rank outlives its test.
class Child {
 public:
  explicit Child(const std::function<int()>& body) : pid_(forkChild(body)) {}
  ~Child() {
    if (pid_ > 0) waitChild(pid_, 0);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }
  /// Waits up to `seconds` (then kills); the child is reaped afterwards.
  ChildEnd wait(double seconds) {
    ChildEnd end;
    if (pid_ <= 0) return end;
    end = waitChild(pid_, seconds);
    pid_ = -1;
    return end;
  }
  void kill() {
    if (pid_ > 0) ::kill(pid_, SIGKILL);
  }

 private:
  pid_t pid_;
};

}  // namespace p2p
}  // namespace test
}  // namespace tccl

#endif  // TCCL_TESTS_P2P_P2P_FORK_UTIL_H_
