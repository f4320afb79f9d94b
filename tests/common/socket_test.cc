/*
 * tests/common/socket_test.cc: addresses, interface choice and deadline-bounded sockets.
 *
 * What it checks: SocketAddress::parse for IPv4, IPv6 and names (and rejects malformed text);
 * TCCL_SOCKET_IFNAME / TCCL_SOCKET_FAMILY; sockets over IPv4 and IPv6 loopback; that every
 * blocking call gives up at its deadline; that a closed peer is tcclRemoteError (and never a
 * SIGPIPE); that connect() waits for a listener that appears late; host identity helpers.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include "tccl/common/socket.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap_test_util.h"  // ScopedEnv
#include "tccl/common/debug.h"

namespace tccl {
namespace {

using test::ScopedEnv;

SocketAddress parsed(const std::string& text) {
  SocketAddress a;
  EXPECT_EQ(SocketAddress::parse(text, &a), tcclSuccess) << text;
  return a;
}

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(SocketAddress, ParseIpv4) {
  SocketAddress a = parsed("1.2.3.4:5678");
  EXPECT_EQ(a.family(), AF_INET);
  EXPECT_EQ(a.port(), 5678);
  EXPECT_EQ(a.toString(), "1.2.3.4:5678");
  EXPECT_EQ(a.len, sizeof(sockaddr_in));
  SocketAddress b = parsed("127.0.0.1");
  EXPECT_EQ(b.port(), 0);
  b.setPort(65535);
  EXPECT_EQ(b.toString(), "127.0.0.1:65535");
}

TEST(SocketAddress, ParseIpv6) {
  SocketAddress a = parsed("[::1]:80");
  EXPECT_EQ(a.family(), AF_INET6);
  EXPECT_EQ(a.port(), 80);
  EXPECT_EQ(a.toString(), "[::1]:80");
  SocketAddress b = parsed("fd00::2");
  EXPECT_EQ(b.family(), AF_INET6);
  EXPECT_EQ(b.port(), 0);
  EXPECT_EQ(b.toString(), "[fd00::2]:0");
  EXPECT_EQ(parsed("[2001:db8::1]").toString(), "[2001:db8::1]:0");
  // Round trip through toString.
  EXPECT_EQ(parsed(a.toString()).toString(), a.toString());
}

TEST(SocketAddress, ParseName) {
  SocketAddress a = parsed("localhost:1234");
  EXPECT_TRUE(a.family() == AF_INET || a.family() == AF_INET6);
  EXPECT_EQ(a.port(), 1234);
}

TEST(SocketAddress, FamilyPreferenceForNames) {
  ScopedEnv fam("TCCL_SOCKET_FAMILY", "AF_INET");
  EXPECT_EQ(parsed("localhost:1").family(), AF_INET);
  // A literal of the other family is still accepted.
  EXPECT_EQ(parsed("[::1]:1").family(), AF_INET6);
}

TEST(SocketAddress, RejectsMalformed) {
  const char* bad[] = {"",
                       ":80",
                       "1.2.3.4:",
                       "1.2.3.4:65536",
                       "1.2.3.4:abc",
                       "1.2.3.4:-1",
                       "[::1",
                       "[::1]x",
                       "[::1]:",
                       "[]:80",
                       "no.such.host.invalid:80",
                       "1.2.3.4:123456"};
  for (const char* text : bad) {
    SocketAddress a;
    clearLastError();
    EXPECT_EQ(SocketAddress::parse(text, &a), tcclInvalidArgument) << "\"" << text << "\"";
    EXPECT_FALSE(a.valid()) << text;
    EXPECT_STRNE(lastError(), "") << "a rejected address must say why: " << text;
  }
  SocketAddress a;
  EXPECT_EQ(SocketAddress::parse(std::string("1.2.3.4\0junk:80", 15), &a), tcclInvalidArgument)
      << "an embedded NUL must not cut the host short";
}

TEST(Interface, DefaultIsUsable) {
  SocketAddress a;
  ASSERT_EQ(findInterfaceAddress(&a), tcclSuccess);
  EXPECT_TRUE(a.valid());
  EXPECT_EQ(a.port(), 0);
}

TEST(Interface, IfnameAndFamily) {
  {
    ScopedEnv ifname("TCCL_SOCKET_IFNAME", "=lo");
    SocketAddress a;
    ASSERT_EQ(findInterfaceAddress(&a), tcclSuccess);
    EXPECT_EQ(a.toString(), "127.0.0.1:0");
    ScopedEnv fam("TCCL_SOCKET_FAMILY", "AF_INET6");
    ASSERT_EQ(findInterfaceAddress(&a), tcclSuccess);
    EXPECT_EQ(a.toString(), "[::1]:0");
  }
  {
    ScopedEnv ifname("TCCL_SOCKET_IFNAME", "l");  // prefix match
    SocketAddress a;
    ASSERT_EQ(findInterfaceAddress(&a), tcclSuccess);
    EXPECT_EQ(a.toString(), "127.0.0.1:0");
  }
  {
    ScopedEnv ifname("TCCL_SOCKET_IFNAME", "=l");  // exact: "l" is no interface
    SocketAddress a;
    clearLastError();
    EXPECT_EQ(findInterfaceAddress(&a), tcclSystemError);
    EXPECT_NE(std::string(lastError()).find("TCCL_SOCKET_IFNAME==l"), std::string::npos)
        << lastError();
  }
  {
    ScopedEnv ifname("TCCL_SOCKET_IFNAME", "^lo");
    SocketAddress a;
    if (findInterfaceAddress(&a) == tcclSuccess) {  // a machine with only lo has nothing left
      EXPECT_NE(a.toString(), "127.0.0.1:0");
    }
  }
}

// A connected pair over loopback of the given family.
void makePair(const char* host, Socket* client, Socket* server) {
  SocketAddress addr = parsed(host), bound;
  Socket listener;
  ASSERT_EQ(listener.listen(addr, &bound), tcclSuccess);
  ASSERT_NE(bound.port(), 0);
  ASSERT_EQ(client->connect(bound, deadlineIn(5)), tcclSuccess);
  ASSERT_EQ(listener.accept(server, deadlineIn(5)), tcclSuccess);
  EXPECT_EQ(client->peer().toString(), bound.toString());
}

class SocketPair : public ::testing::TestWithParam<const char*> {};

TEST_P(SocketPair, SendRecvLarge) {
  Socket c, s;
  makePair(GetParam(), &c, &s);
  std::vector<uint32_t> out(1 << 20), in(1 << 20);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint32_t>(i * 2654435761u);
  tcclResult_t sendRes = tcclInternalError;
  // 4 MiB exceeds the socket buffers: the sender must wait for the receiver.
  std::thread sender([&] { sendRes = c.sendAll(out.data(), out.size() * 4, deadlineIn(10)); });
  EXPECT_EQ(s.recvAll(in.data(), in.size() * 4, deadlineIn(10)), tcclSuccess);
  sender.join();
  EXPECT_EQ(sendRes, tcclSuccess);
  EXPECT_EQ(in, out);
}

INSTANTIATE_TEST_SUITE_P(Loopback, SocketPair, ::testing::Values("127.0.0.1", "[::1]"));

TEST(Socket, RecvTimesOut) {
  Socket c, s;
  makePair("127.0.0.1", &c, &s);
  char buf[8];
  auto t0 = Clock::now();
  clearLastError();
  EXPECT_EQ(s.recvAll(buf, sizeof(buf), deadlineIn(0.3)), tcclSystemError);
  EXPECT_LT(secondsSince(t0), 2.0);
  EXPECT_GE(secondsSince(t0), 0.25);
  EXPECT_NE(std::string(lastError()).find("timed out"), std::string::npos) << lastError();
}

TEST(Socket, PeerCloseIsRemoteErrorWithoutSigpipe) {
  Socket c, s;
  makePair("127.0.0.1", &c, &s);
  std::string peer = c.peer().toString();
  s.close();
  char buf[8];
  EXPECT_EQ(c.recvAll(buf, sizeof(buf), deadlineIn(5)), tcclRemoteError);
  // Sending into a closed connection raises SIGPIPE unless MSG_NOSIGNAL is used: the test
  // process surviving this loop is the check.
  std::vector<char> data(1 << 16);
  tcclResult_t res = tcclSuccess;
  for (int i = 0; i < 100 && res == tcclSuccess; ++i)
    res = c.sendAll(data.data(), data.size(), deadlineIn(5));
  EXPECT_EQ(res, tcclRemoteError);
  EXPECT_NE(std::string(lastError()).find(peer), std::string::npos) << lastError();
}

TEST(Socket, TrySendTryRecv) {
  Socket c, s;
  makePair("[::1]", &c, &s);
  char buf[16];
  size_t done = 0;
  EXPECT_EQ(s.tryRecv(buf, sizeof(buf), &done), tcclSuccess);
  EXPECT_EQ(done, 0u) << "nothing to read yet";
  size_t sent = 0;
  EXPECT_EQ(c.trySend("hello", 5, &sent), tcclSuccess);
  EXPECT_EQ(sent, 5u);
  auto until = deadlineIn(5);
  while (done < 5 && Clock::now() < until)
    ASSERT_EQ(s.tryRecv(buf + done, 5 - done, &done), tcclSuccess);
  EXPECT_EQ(std::string(buf, 5), "hello");
  c.close();
  done = 0;
  tcclResult_t res = tcclSuccess;
  while (res == tcclSuccess && Clock::now() < until) res = s.tryRecv(buf, sizeof(buf), &done);
  EXPECT_EQ(res, tcclRemoteError);
}

// The gathered send behind the socket transport's size header (header and data leave in one
// system call): both pieces arrive in order, and a call that moved only part of them resumes
// where it stopped, the header counted first, as SocketSendComm::progress does.
TEST(Socket, TrySend2SendsBothPiecesInOrderAndResumes) {
  Socket c, s;
  makePair("127.0.0.1", &c, &s);
  c.tuneForData(64 << 10);  // a small send buffer: 1 MiB takes many partial calls
  const std::string head = "HEADER!!";
  std::vector<char> body(1 << 20);
  for (size_t i = 0; i < body.size(); i++) body[i] = char(i * 7 + 1);
  const std::string want = head + std::string(body.begin(), body.end());
  std::string got;
  std::thread reader([&] {
    std::vector<char> buf(1 << 16);
    const auto until = deadlineIn(10);
    while (got.size() < want.size() && Clock::now() < until) {
      size_t n = 0;
      if (s.tryRecv(buf.data(), buf.size(), &n) != tcclSuccess) break;
      got.append(buf.data(), n);
    }
  });
  size_t sent = 0;
  int calls = 0;
  tcclResult_t res = tcclSuccess;
  const auto until = deadlineIn(10);
  while (sent < want.size() && res == tcclSuccess && Clock::now() < until) {
    const size_t h = std::min(sent, head.size());
    const size_t b = sent - h;
    size_t n = 0;
    res = c.trySend2(head.data() + h, head.size() - h, body.data() + b, body.size() - b, &n);
    sent += n;
    calls++;
  }
  reader.join();
  EXPECT_EQ(res, tcclSuccess);
  EXPECT_EQ(sent, want.size());
  EXPECT_GT(calls, 1) << "1 MiB should not fit a 64 KiB send buffer in one call";
  ASSERT_EQ(got.size(), want.size());
  EXPECT_TRUE(got == want) << "bytes arrived out of order or changed";
}

// The read-ahead behind the socket transport's header reads: a small read takes what came
// along into the socket's buffer, later reads (tryRecv and recvAll) are served from it in
// stream order, a short read leaves it empty, and it cannot be dropped while it holds bytes.
TEST(Socket, ReadAheadServesSmallReadsInStreamOrder) {
  Socket c, s;
  makePair("127.0.0.1", &c, &s);
  ASSERT_TRUE(s.setReadAhead(64));
  const std::string stream = "HDR1payload-oneHDR2z";  // one send: one segment on loopback
  size_t sent = 0;
  ASSERT_EQ(c.trySend(stream.data(), stream.size(), &sent), tcclSuccess);
  ASSERT_EQ(sent, stream.size());
  char buf[256] = {};
  size_t done = 0;
  const auto until = deadlineIn(5);
  while (done == 0 && Clock::now() < until) ASSERT_EQ(s.tryRecv(buf, 4, &done), tcclSuccess);
  ASSERT_EQ(done, 4u);
  EXPECT_EQ(std::string(buf, 4), "HDR1");
  EXPECT_EQ(s.readAheadBytes(), stream.size() - 4) << "the rest came along in the same recv()";
  EXPECT_FALSE(s.setReadAhead(0)) << "buffered bytes belong to the stream";
  done = 0;
  ASSERT_EQ(s.tryRecv(buf, 11, &done), tcclSuccess);
  EXPECT_EQ(std::string(buf, done), "payload-one");
  done = 0;
  ASSERT_EQ(s.tryRecv(buf, 8, &done), tcclSuccess);  // wants more than is buffered
  EXPECT_EQ(std::string(buf, done), "HDR2z") << "a short read returns what was read ahead";
  EXPECT_EQ(s.readAheadBytes(), 0u) << "a short read leaves the read-ahead empty";
  // A read of the buffer's size or more goes straight to the caller's memory; recvAll takes
  // what a small tryRecv read ahead first.
  const std::string big(100, 'b');
  ASSERT_EQ(c.trySend((big + "tail").data(), big.size() + 4, &sent), tcclSuccess);
  done = 0;
  while (done < big.size() && Clock::now() < until) {
    ASSERT_EQ(s.tryRecv(buf + done, big.size() - done, &done), tcclSuccess);
  }
  EXPECT_EQ(std::string(buf, done), big);
  EXPECT_EQ(s.readAheadBytes(), 0u);
  done = 0;
  while (done == 0 && Clock::now() < until) ASSERT_EQ(s.tryRecv(buf, 1, &done), tcclSuccess);
  EXPECT_EQ(buf[0], 't');
  ASSERT_EQ(s.recvAll(buf, 3, deadlineIn(5)), tcclSuccess);
  EXPECT_EQ(std::string(buf, 3), "ail");
  EXPECT_TRUE(s.setReadAhead(0));
}

TEST(Socket, ConnectWaitsForLateListener) {
  // Find a free port, then listen on it only after the client started connecting.
  SocketAddress addr = parsed("127.0.0.1"), bound;
  {
    Socket probe;
    ASSERT_EQ(probe.listen(addr, &bound), tcclSuccess);
  }
  Socket listener, server;
  std::thread late([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(listener.listen(bound, nullptr), tcclSuccess);
    EXPECT_EQ(listener.accept(&server, deadlineIn(5)), tcclSuccess);
  });
  Socket client;
  EXPECT_EQ(client.connect(bound, deadlineIn(5)), tcclSuccess);
  late.join();
  EXPECT_TRUE(server.valid());
}

TEST(Socket, ConnectGivesUpAtDeadline) {
  SocketAddress addr = parsed("127.0.0.1"), bound;
  {
    Socket probe;
    ASSERT_EQ(probe.listen(addr, &bound), tcclSuccess);
  }  // closed: nobody listens there now
  Socket client;
  auto t0 = Clock::now();
  clearLastError();
  EXPECT_EQ(client.connect(bound, deadlineIn(0.4)), tcclSystemError);
  EXPECT_LT(secondsSince(t0), 2.0);
  EXPECT_NE(std::string(lastError()).find(bound.toString()), std::string::npos) << lastError();
}

TEST(Socket, AcceptTimesOut) {
  Socket listener;
  SocketAddress bound;
  ASSERT_EQ(listener.listen(parsed("127.0.0.1"), &bound), tcclSuccess);
  Socket s;
  auto t0 = Clock::now();
  EXPECT_EQ(listener.accept(&s, deadlineIn(0.2)), tcclSystemError);
  EXPECT_LT(secondsSince(t0), 2.0);
}

TEST(Socket, MoveClosesOnce) {
  Socket c, s;
  makePair("127.0.0.1", &c, &s);
  int fd = c.fd();
  Socket moved(std::move(c));
  EXPECT_FALSE(c.valid());
  EXPECT_EQ(moved.fd(), fd);
  Socket assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.fd(), fd);
  assigned.tuneForData(1 << 20);
  EXPECT_EQ(assigned.setNonBlocking(true), tcclSuccess);
}

TEST(HostIdentity, HostHashAndRandom) {
  uint64_t plain = getHostHash();
  EXPECT_EQ(plain, getHostHash());
  {
    ScopedEnv id("TCCL_HOSTID", "node-a");
    uint64_t a = getHostHash();
    setenv("TCCL_HOSTID", "node-b", 1);
    EXPECT_NE(a, getHostHash());
    setenv("TCCL_HOSTID", "node-a", 1);
    EXPECT_EQ(a, getHostHash());
    EXPECT_NE(a, plain);
  }
  EXPECT_GT(strlen(getHostName()), 0u);
  EXPECT_EQ(strchr(getHostName(), '.'), nullptr);
  EXPECT_NE(randomU64(), randomU64());
}

TEST(Deadline, NonPositiveMeansNever) {
  EXPECT_EQ(deadlineIn(0), Deadline::max());
  EXPECT_EQ(deadlineIn(-1), Deadline::max());
  EXPECT_GT(deadlineIn(1), Clock::now());
}

}  // namespace
}  // namespace tccl
