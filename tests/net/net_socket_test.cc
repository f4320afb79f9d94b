/*
 * tests/net/net_socket_test.cc: the Net interface (transport/net/net.h) as the socket Net
 * implements it, driven directly, both ends in one process.
 *
 * What it is: the contract the network transport relies on, checked call by call:
 *  - listen / connect / accept give a connected pair (connect never needs accept first);
 *  - messages of many sizes (0 bytes, small, large enough to be cut over several sockets)
 *    arrive intact, in order, each in the receive posted for it, with its size;
 *  - several requests in flight at once complete in order;
 *  - net.h's rules: a message larger than the posted receive leaves the buffer untouched and
 *    reports its true size, and the stream stays in step (the next message is intact); a
 *    clean close completes a pending receive with kNetClosed;
 *  - a connection that does not carry the listener's token is refused, and the real one still
 *    gets through; a handle that is not a socket handle is refused before any connect.
 * CTest runs it twice: with one socket per connection, and with three (TCCL_NSOCKS_PERCONN,
 * read once per process), where the large messages are cut into parts.
 *
 * Invariants: every wait is bounded (kPatience); a test that fails never hangs the suite.
 * NCCL counterpart: none (NCCL's net plugins have no unit tests in its tree).
 * Added in: stage 6.
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "transport/net/socket/net_socket.h"

namespace tccl {
namespace {

constexpr auto kPatience = std::chrono::seconds(30);

/// Calls test() until the request is done; false after kPatience.
bool waitDone(Net& net, NetRequest* req, size_t* size) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  bool done = false;
  while (!done) {
    if (net.test(req, &done, size) != tcclSuccess) return false;
    if (!done && std::chrono::steady_clock::now() > until) return false;
  }
  return true;
}

/// A connected pair over the socket Net.
struct Pair {
  Net& net = socketNet();
  NetSendComm* send = nullptr;
  NetRecvComm* recv = nullptr;

  Pair() {
    NetHandle handle;
    NetListenComm* listen = nullptr;
    EXPECT_EQ(net.listen(0, &handle, &listen), tcclSuccess);
    // The sender connects before anyone accepts: TCP's backlog holds the connection.
    EXPECT_EQ(net.connect(0, &handle, &send), tcclSuccess);
    EXPECT_NE(send, nullptr);
    EXPECT_EQ(net.accept(listen, &recv), tcclSuccess);
    EXPECT_NE(recv, nullptr);
    EXPECT_EQ(net.closeListen(listen), tcclSuccess);
  }
  ~Pair() {
    if (send) net.closeSend(send);
    if (recv) net.closeRecv(recv);
  }
};

std::vector<uint8_t> pattern(size_t n, int seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; i++) v[i] = uint8_t(i * 131 + seed * 17 + (i >> 13));
  return v;
}

TEST(NetSocket, MessagesOfEverySizeArriveInOrder) {
  Pair p;
  ASSERT_NE(p.send, nullptr);
  ASSERT_NE(p.recv, nullptr);
  const size_t sizes[] = {0, 1, 8, 4095, 4096, 65536, 3 << 20, 7, (5 << 20) + 3};
  // The receiver posts every receive first, then the sender sends them all: several requests
  // in flight on both sides, completed in order. Sending runs on a thread of its own (a large
  // message fills the socket buffers; only the receiver's tests drain them).
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<NetRequest*> recvs;
  for (size_t i = 0; i < std::size(sizes); i++) {
    out.push_back(pattern(sizes[i], int(i)));
    in.emplace_back(sizes[i] + 16, 0xEE);
    NetRequest* r = nullptr;
    ASSERT_EQ(p.net.irecv(p.recv, in[i].data(), sizes[i] + 16, nullptr, &r), tcclSuccess);
    ASSERT_NE(r, nullptr);
    recvs.push_back(r);
  }
  bool sendOk = true;
  std::thread sender([&] {
    std::vector<NetRequest*> sends;
    for (size_t i = 0; i < std::size(sizes); i++) {
      NetRequest* r = nullptr;
      sendOk = sendOk && p.net.isend(p.send, out[i].data(), sizes[i], nullptr, &r) == tcclSuccess;
      sendOk = sendOk && r != nullptr;
      sends.push_back(r);
    }
    for (NetRequest* r : sends) sendOk = sendOk && r != nullptr && waitDone(p.net, r, nullptr);
  });
  for (size_t i = 0; i < std::size(sizes); i++) {
    size_t got = 0;
    ASSERT_TRUE(waitDone(p.net, recvs[i], &got)) << "message " << i;
    EXPECT_EQ(got, sizes[i]) << "message " << i;
    EXPECT_TRUE(std::equal(out[i].begin(), out[i].end(), in[i].begin())) << "message " << i;
    // Nothing beyond the message was written.
    for (size_t j = sizes[i]; j < in[i].size(); j++) ASSERT_EQ(in[i][j], 0xEE) << "message " << i;
  }
  sender.join();
  EXPECT_TRUE(sendOk);
}

TEST(NetSocket, TooLargeIsDroppedAndTheStreamStaysInStep) {
  Pair p;
  ASSERT_NE(p.send, nullptr);
  const std::vector<uint8_t> big = pattern(300000, 1), next = pattern(1000, 2);
  std::vector<uint8_t> small(1000, 0xEE), after(1000, 0);
  NetRequest *r1 = nullptr, *r2 = nullptr, *s1 = nullptr, *s2 = nullptr;
  ASSERT_EQ(p.net.irecv(p.recv, small.data(), small.size(), nullptr, &r1), tcclSuccess);
  ASSERT_EQ(p.net.irecv(p.recv, after.data(), after.size(), nullptr, &r2), tcclSuccess);
  std::thread sender([&] {
    p.net.isend(p.send, const_cast<uint8_t*>(big.data()), big.size(), nullptr, &s1);
    p.net.isend(p.send, const_cast<uint8_t*>(next.data()), next.size(), nullptr, &s2);
    if (s1) waitDone(p.net, s1, nullptr);
    if (s2) waitDone(p.net, s2, nullptr);
  });
  size_t got = 0;
  ASSERT_TRUE(waitDone(p.net, r1, &got));
  EXPECT_EQ(got, big.size()) << "the true size of a message larger than the receive";
  EXPECT_EQ(small, std::vector<uint8_t>(1000, 0xEE)) << "a dropped message wrote the buffer";
  ASSERT_TRUE(waitDone(p.net, r2, &got));
  EXPECT_EQ(got, next.size());
  EXPECT_EQ(after, next) << "the message after a dropped one";
  sender.join();
}

TEST(NetSocket, CleanCloseCompletesAPendingReceive) {
  Pair p;
  ASSERT_NE(p.send, nullptr);
  std::vector<uint8_t> buf(64);
  NetRequest* r = nullptr;
  ASSERT_EQ(p.net.irecv(p.recv, buf.data(), buf.size(), nullptr, &r), tcclSuccess);
  ASSERT_EQ(p.net.closeSend(p.send), tcclSuccess);
  p.send = nullptr;
  size_t got = 0;
  ASSERT_TRUE(waitDone(p.net, r, &got));
  EXPECT_EQ(got, kNetClosed);
}

TEST(NetSocket, StrangersAndForeignHandlesAreRefused) {
  Net& net = socketNet();
  NetHandle handle;
  NetListenComm* listen = nullptr;
  ASSERT_EQ(net.listen(0, &handle, &listen), tcclSuccess);
  // A stranger connects first, with the right address and the wrong token.
  SocketNetHandle h;
  memcpy(&h, handle.bytes, sizeof(h));
  const char* knob = getenv("TCCL_NSOCKS_PERCONN");
  EXPECT_EQ(h.nsocks, knob ? atoi(knob) : 1) << "the handle carries the listener's socket count";
  NetHandle forged = handle;
  SocketNetHandle hf = h;
  hf.token ^= 1;
  memcpy(forged.bytes, &hf, sizeof(hf));
  NetSendComm* stranger = nullptr;
  ASSERT_EQ(net.connect(0, &forged, &stranger), tcclSuccess);
  NetSendComm* send = nullptr;
  ASSERT_EQ(net.connect(0, &handle, &send), tcclSuccess);
  NetRecvComm* recv = nullptr;
  ASSERT_EQ(net.accept(listen, &recv), tcclSuccess);  // refuses the stranger, takes ours
  ASSERT_NE(recv, nullptr);
  uint64_t v = 42, w = 0;
  NetRequest *rs = nullptr, *rr = nullptr;
  ASSERT_EQ(net.irecv(recv, &w, sizeof(w), nullptr, &rr), tcclSuccess);
  ASSERT_EQ(net.isend(send, &v, sizeof(v), nullptr, &rs), tcclSuccess);
  ASSERT_TRUE(waitDone(net, rs, nullptr));
  size_t got = 0;
  ASSERT_TRUE(waitDone(net, rr, &got));
  EXPECT_EQ(got, sizeof(v));
  EXPECT_EQ(w, 42u);
  net.closeSend(stranger);
  net.closeSend(send);
  net.closeRecv(recv);
  net.closeListen(listen);
  // A handle that is not the socket Net's is refused before anything connects.
  NetHandle junk{};
  NetSendComm* none = nullptr;
  EXPECT_NE(net.connect(0, &junk, &none), tcclSuccess);
  EXPECT_EQ(none, nullptr);
  hf = h;
  hf.nsocks = kMaxSocketsPerConn + 1;
  EXPECT_NE(checkSocketNetHandle(hf), tcclSuccess);
}

}  // namespace
}  // namespace tccl
