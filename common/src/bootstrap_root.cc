/*
 * common/src/bootstrap_root.cc: the root that introduces the ranks of one communicator.
 *
 * What it is: a detached thread, started by tcclGetUniqueId (or by rank 0 for ids built from
 * TCCL_COMM_ID / torchrun's environment), that accepts one check-in per rank (rank, nranks,
 * the rank's listen address) and, once all nranks ranks are in, tells each rank the listen
 * address of its ring successor (rank+1) % nranks. From there the ranks all-gather every
 * address around the ring themselves; the root's job is done and the thread exits.
 *
 * Invariants:
 *  - A connection with a bad magic or the wrong secret is refused (WARN, close) and the root
 *    keeps serving: a port scanner or a stale job cannot break a communicator.
 *  - A check-in whose nranks disagrees with the first one, or that repeats a rank, gets an
 *    error reply and is closed; the other ranks are unaffected.
 *  - The clock starts at the first check-in: if TCCL_BOOTSTRAP_TIMEOUT passes before every
 *    rank is in, each rank that did check in gets an error naming the missing ranks, and the
 *    thread exits (it never serves forever a job that is already dead).
 *  - One thread, no blocking step without a deadline: pending connections are multiplexed with
 *    poll(); one that sends nothing is dropped after kHelloSeconds, and one that stalls in the
 *    middle of its check-in holds the root at most that long.
 *
 * NCCL counterpart: src/bootstrap.cc (bootstrapRoot, bootstrapCreateRoot).
 * Added in: foundation (common/).
 */
#include <poll.h>

#include <algorithm>
#include <map>
#include <system_error>
#include <thread>
#include <vector>

#include "bootstrap_internal.h"
#include "tccl/common/debug.h"

namespace tccl {
namespace {

class Root {
 public:
  Root(Socket listener, uint64_t secret) : listener_(std::move(listener)), secret_(secret) {}
  void run();

 private:
  struct Pending {
    Socket sock;
    Deadline helloBy;
  };
  struct Member {
    Socket sock;
    SocketAddress listen;
  };

  void acceptOne();
  void serveCheckin(Socket sock);
  void replyError(Socket& sock, const std::string& text);
  void introduce();
  void giveUp();

  Socket listener_;
  uint64_t secret_;
  int nranks_ = 0;                       // 0 until the first valid check-in
  Deadline deadline_ = Deadline::max();  // set at the first valid check-in
  std::vector<Pending> pending_;         // accepted, check-in not read yet
  std::map<int, Member> members_;        // checked in, by rank (a map: nranks comes off the wire)
};

void Root::run() {
  while (nranks_ == 0 || static_cast<int>(members_.size()) < nranks_) {
    if (Clock::now() >= deadline_) return giveUp();
    std::vector<pollfd> fds{{listener_.fd(), POLLIN, 0}};
    for (auto& p : pending_) fds.push_back({p.sock.fd(), POLLIN, 0});
    // Wake at least once a second to drop silent connections, and at the deadline.
    int timeoutMs = -1;
    if (!pending_.empty()) timeoutMs = 1000;
    if (deadline_ != Deadline::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
      timeoutMs = static_cast<int>(std::max<int64_t>(0, std::min<int64_t>(1000, left.count() + 1)));
    }
    int rc = poll(fds.data(), fds.size(), timeoutMs);
    if (rc < 0 && errno != EINTR) {
      TCCL_WARN("bootstrap root: poll failed: %s; giving up", strerror(errno));
      return giveUp();
    }
    Clock::time_point now = Clock::now();
    std::vector<Pending> still;
    for (size_t i = 0; i < pending_.size(); ++i) {
      if (rc > 0 && fds[i + 1].revents != 0) {
        serveCheckin(std::move(pending_[i].sock));
      } else if (now >= pending_[i].helloBy) {
        TCCL_WARN("bootstrap root: %s sent no check-in within %.0f s; dropped",
                  pending_[i].sock.peer().toString().c_str(), kHelloSeconds);
      } else {
        still.push_back(std::move(pending_[i]));
      }
    }
    pending_ = std::move(still);
    if (rc > 0 && (fds[0].revents & POLLIN)) acceptOne();
  }
  introduce();
}

void Root::acceptOne() {
  Socket sock;
  // The listener said it is readable, so this returns at once (or fails harmlessly).
  if (listener_.accept(&sock, deadlineIn(0.1)) != tcclSuccess) return;
  pending_.push_back({std::move(sock), deadlineIn(kHelloSeconds)});
}

// Reads and judges one check-in. Each check below protects the others: the header is
// validated before the payload is read, so garbage never makes us wait for or allocate bytes.
void Root::serveCheckin(Socket sock) {
  std::string from = sock.peer().toString();
  Deadline by = deadlineIn(kHelloSeconds);
  BootstrapHeader h;
  if (sock.recvAll(&h, sizeof(h), by) != tcclSuccess) return;
  int bound = nranks_ > 0 ? nranks_ : INT32_MAX;
  if (checkBootstrapHeader(h, secret_, bound, sizeof(CheckinInfo)) != tcclSuccess ||
      h.type != kMsgCheckin || h.size != sizeof(CheckinInfo)) {
    TCCL_WARN("bootstrap root: refused a connection from %s (not a valid check-in)", from.c_str());
    return;
  }
  CheckinInfo info;
  if (sock.recvAll(&info, sizeof(info), by) != tcclSuccess) return;
  if (checkWireAddress(info.listen) != tcclSuccess || info.nranks < 1 ||
      static_cast<uint32_t>(info.nranks) != h.tag || h.rank >= info.nranks) {
    TCCL_WARN("bootstrap root: malformed check-in from %s (rank %d, nranks %d)", from.c_str(),
              h.rank, info.nranks);
    return replyError(sock, "malformed check-in");
  }
  if (nranks_ != 0 && info.nranks != nranks_) {
    std::string text = "rank " + std::to_string(h.rank) +
                       " says nranks=" + std::to_string(info.nranks) +
                       " but the communicator has " + std::to_string(nranks_) + " ranks";
    TCCL_WARN("bootstrap root: %s", text.c_str());
    return replyError(sock, text);
  }
  if (members_.count(h.rank) != 0) {
    std::string text = "rank " + std::to_string(h.rank) + " checked in twice (from " +
                       members_[h.rank].sock.peer().toString() + " and " + from + ")";
    TCCL_WARN("bootstrap root: %s", text.c_str());
    return replyError(sock, text);
  }
  if (nranks_ == 0) {
    nranks_ = info.nranks;
    deadline_ = deadlineIn(static_cast<double>(tcclParamBootstrapTimeout()));
  }
  TCCL_INFO(kBootstrap, "bootstrap root: rank %d of %d checked in from %s (listens on %s)", h.rank,
            nranks_, from.c_str(), info.listen.toString().c_str());
  members_[h.rank] = Member{std::move(sock), info.listen};
}

void Root::replyError(Socket& sock, const std::string& text) {
  std::string t = text.substr(0, kMaxRootErrorText);
  BootstrapHeader h = makeBootstrapHeader(kMsgRootError, secret_, 0, 0, t.size());
  Deadline by = deadlineIn(kHelloSeconds);
  if (sock.sendAll(&h, sizeof(h), by) == tcclSuccess) sock.sendAll(t.data(), t.size(), by);
}

// Everyone is in: rank r learns where rank r+1 listens. That is all a rank needs to join the
// ring; the full address table travels around the ring afterwards (no O(n^2) work here).
void Root::introduce() {
  Deadline by = deadlineIn(kHelloSeconds);
  for (auto& [rank, m] : members_) {
    const SocketAddress& next = members_[(rank + 1) % nranks_].listen;
    BootstrapHeader h = makeBootstrapHeader(kMsgRootPeer, secret_, 0, 0, sizeof(next));
    if (m.sock.sendAll(&h, sizeof(h), by) != tcclSuccess ||
        m.sock.sendAll(&next, sizeof(next), by) != tcclSuccess)
      TCCL_WARN("bootstrap root: could not tell rank %d its successor", rank);
  }
  TCCL_INFO(kBootstrap, "bootstrap root: all %d ranks checked in; root done", nranks_);
}

// The deadline passed: tell every rank that came which ones did not, then stop.
void Root::giveUp() {
  std::string missing;
  int count = 0, listed = 0;
  for (int r = 0; r < nranks_ && count < nranks_ - static_cast<int>(members_.size()); ++r) {
    if (members_.count(r) != 0) continue;
    ++count;
    if (listed < 16) {
      missing += (listed == 0 ? "" : ",") + std::to_string(r);
      ++listed;
    }
  }
  if (count > listed) missing += ",...";
  std::string text =
      std::string(count == 1 ? "rank " : "ranks ") + missing + " of " + std::to_string(nranks_) +
      " never joined (TCCL_BOOTSTRAP_TIMEOUT=" + std::to_string(tcclParamBootstrapTimeout()) +
      " s)";
  TCCL_WARN("bootstrap root: %s", text.c_str());
  for (auto& [rank, m] : members_) replyError(m.sock, text);
}

}  // namespace

tcclResult_t bootstrapRootStart(Socket&& listener, uint64_t secret) {
  TCCL_ARG_CHECK(listener.valid(), "bootstrapRootStart: listener is not open");
  auto* root = new Root(std::move(listener), secret);
  try {
    // Detached: the root lives exactly as long as its communicator's formation.
    std::thread([root] {
      root->run();
      delete root;
    }).detach();
  } catch (const std::system_error& e) {
    delete root;
    TCCL_WARN("cannot start the bootstrap root thread: %s", e.what());
    return tcclSystemError;
  }
  return tcclSuccess;
}

tcclResult_t bootstrapRootCreate(const SocketAddress& addr, uint64_t secret) {
  // Listen on every interface of the family, at the id's port: the name in MASTER_ADDR or
  // TCCL_COMM_ID may resolve, on rank 0's host, to an address other ranks cannot use (such as
  // Debian's 127.0.1.1 for the own host name). The secret, not the address, keeps others out.
  SocketAddress any;
  any.storage.ss_family = static_cast<sa_family_t>(addr.family());
  any.len = addr.family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  if (addr.family() == AF_INET6) {
    reinterpret_cast<sockaddr_in6*>(&any.storage)->sin6_addr = in6addr_any;
  } else {
    reinterpret_cast<sockaddr_in*>(&any.storage)->sin_addr.s_addr = htonl(INADDR_ANY);
  }
  any.setPort(addr.port());
  Socket listener;
  TCCL_CHECK(listener.listen(any, nullptr));
  TCCL_INFO(kBootstrap, "bootstrap root started on port %u for %s", addr.port(),
            addr.toString().c_str());
  return bootstrapRootStart(std::move(listener), secret);
}

}  // namespace tccl
