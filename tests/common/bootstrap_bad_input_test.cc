/*
 * tests/common/bootstrap_bad_input_test.cc: the bootstrap facing strangers and broken peers.
 *
 * What it checks: a raw connection with the wrong secret is refused by the root and by a
 * rank (and the communicator still forms / still works); a truncated message and a header
 * announcing more than kMaxBootstrapMessage are dropped without being delivered or waited on;
 * a recv of the wrong size fails with both sizes named; a duplicate rank is turned away; the
 * frame parser used by the fuzzer rejects each kind of bad frame.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap_internal.h"
#include "bootstrap_test_util.h"

namespace tccl {
namespace {

using test::createAll;
using test::newUniqueId;
using test::runRanks;

UniqueIdData decoded(const std::vector<char>& id) {
  UniqueIdData d;
  EXPECT_EQ(decodeUniqueId(id.data(), &d), tcclSuccess);
  return d;
}

// True when the other side closes `s` within a few seconds (what a refusal looks like).
bool closedByPeer(Socket& s) {
  char c;
  tcclResult_t res = s.recvAll(&c, 1, deadlineIn(8));
  return res == tcclRemoteError;
}

bool sendRaw(Socket& s, const void* data, size_t size) {
  return s.sendAll(data, size, deadlineIn(5)) == tcclSuccess;
}

TEST(BootstrapBadInput, RootRefusesWrongSecret) {
  auto id = newUniqueId();
  UniqueIdData d = decoded(id);
  Socket intruder;
  ASSERT_EQ(intruder.connect(d.root, deadlineIn(5)), tcclSuccess);
  CheckinInfo info{2, 0, d.root};
  BootstrapHeader h = makeBootstrapHeader(kMsgCheckin, d.secret + 1, 0, 2, sizeof(info));
  ASSERT_TRUE(sendRaw(intruder, &h, sizeof(h)));
  ASSERT_TRUE(sendRaw(intruder, &info, sizeof(info)));
  EXPECT_TRUE(closedByPeer(intruder)) << "the root must drop a wrong secret";
  // Plain garbage too.
  Socket garbage;
  ASSERT_EQ(garbage.connect(d.root, deadlineIn(5)), tcclSuccess);
  std::string junk(200, 'G');
  ASSERT_TRUE(sendRaw(garbage, junk.data(), junk.size()));
  EXPECT_TRUE(closedByPeer(garbage));
  // The intruders took no rank: the real ranks 0 and 1 still form the communicator.
  auto results = runRanks(2, id, [](int, Bootstrap& b) { return b.barrier() == tcclSuccess; });
  for (auto& r : results) EXPECT_EQ(r.result, tcclSuccess) << r.lastError;
}

TEST(BootstrapBadInput, RankRefusesWrongSecret) {
  auto id = newUniqueId();
  UniqueIdData d = decoded(id);
  auto b = createAll(2, id);
  ASSERT_EQ(b.size(), 2u);
  SocketAddress target = bootstrapListenAddress(*b[0]);

  // A hello with the wrong secret, then a message that would match recv(1, 5).
  Socket intruder;
  ASSERT_EQ(intruder.connect(target, deadlineIn(5)), tcclSuccess);
  BootstrapHeader hello = makeBootstrapHeader(kMsgHello, d.secret ^ 1, 1, 0, 0);
  BootstrapHeader msg = makeBootstrapHeader(kMsgUser, d.secret ^ 1, 1, 5, 4);
  ASSERT_TRUE(sendRaw(intruder, &hello, sizeof(hello)));
  sendRaw(intruder, &msg, sizeof(msg));  // may fail: the rank may have closed already
  sendRaw(intruder, "FAKE", 4);
  EXPECT_TRUE(closedByPeer(intruder));

  // A good hello followed by a header with a wrong secret is dropped as well.
  Socket sneaky;
  ASSERT_EQ(sneaky.connect(target, deadlineIn(5)), tcclSuccess);
  hello.secret = d.secret;
  ASSERT_TRUE(sendRaw(sneaky, &hello, sizeof(hello)));
  sendRaw(sneaky, &msg, sizeof(msg));
  sendRaw(sneaky, "FAKE", 4);
  EXPECT_TRUE(closedByPeer(sneaky));

  ASSERT_EQ(b[1]->send(0, 5, "REAL", 4), tcclSuccess);
  char got[5] = "";
  ASSERT_EQ(b[0]->recv(1, 5, got, 4), tcclSuccess);
  EXPECT_STREQ(got, "REAL") << "only the real rank's message is delivered";
}

TEST(BootstrapBadInput, TruncatedMessageIsDropped) {
  auto id = newUniqueId();
  UniqueIdData d = decoded(id);
  auto b = createAll(2, id);
  ASSERT_EQ(b.size(), 2u);
  {
    Socket s;
    ASSERT_EQ(s.connect(bootstrapListenAddress(*b[0]), deadlineIn(5)), tcclSuccess);
    BootstrapHeader hello = makeBootstrapHeader(kMsgHello, d.secret, 1, 0, 0);
    BootstrapHeader msg = makeBootstrapHeader(kMsgUser, d.secret, 1, 7, 100);
    ASSERT_TRUE(sendRaw(s, &hello, sizeof(hello)));
    ASSERT_TRUE(sendRaw(s, &msg, sizeof(msg)));
    ASSERT_TRUE(sendRaw(s, "0123456789", 10));  // 10 of 100 bytes, then close
    // And a connection that dies inside a header.
    Socket t;
    ASSERT_EQ(t.connect(bootstrapListenAddress(*b[0]), deadlineIn(5)), tcclSuccess);
    ASSERT_TRUE(sendRaw(t, &hello, sizeof(hello)));
    ASSERT_TRUE(sendRaw(t, &msg, 12));
  }
  std::vector<char> real(100, 'R'), got(100);
  ASSERT_EQ(b[1]->send(0, 7, real.data(), real.size()), tcclSuccess);
  ASSERT_EQ(b[0]->recv(1, 7, got.data(), got.size()), tcclSuccess);
  EXPECT_EQ(got, real) << "the truncated message must not be delivered";
}

TEST(BootstrapBadInput, OversizedHeaderIsRejectedBeforeThePayload) {
  auto id = newUniqueId();
  UniqueIdData d = decoded(id);
  auto b = createAll(2, id);
  ASSERT_EQ(b.size(), 2u);
  for (uint64_t size : {uint64_t(kMaxBootstrapMessage) + 1, uint64_t(1) << 62, ~uint64_t(0)}) {
    Socket s;
    ASSERT_EQ(s.connect(bootstrapListenAddress(*b[0]), deadlineIn(5)), tcclSuccess);
    BootstrapHeader hello = makeBootstrapHeader(kMsgHello, d.secret, 1, 0, 0);
    BootstrapHeader msg = makeBootstrapHeader(kMsgUser, d.secret, 1, 3, size);
    ASSERT_TRUE(sendRaw(s, &hello, sizeof(hello)));
    ASSERT_TRUE(sendRaw(s, &msg, sizeof(msg)));
    // Rejected from the header alone: the rank closes without waiting for any payload byte.
    EXPECT_TRUE(closedByPeer(s)) << "size " << size;
  }
  int v = 17, got = 0;
  ASSERT_EQ(b[1]->send(0, 3, &v, sizeof(v)), tcclSuccess);
  ASSERT_EQ(b[0]->recv(1, 3, &got, sizeof(got)), tcclSuccess);
  EXPECT_EQ(got, 17);
  // The sending side refuses it too.
  std::vector<char> dummy(1);
  EXPECT_EQ(b[1]->send(0, 3, dummy.data(), kMaxBootstrapMessage + 1), tcclInvalidArgument);
}

TEST(BootstrapBadInput, RecvOfTheWrongSizeFails) {
  auto id = newUniqueId();
  auto b = createAll(2, id);
  ASSERT_EQ(b.size(), 2u);
  uint64_t eight = 8;
  ASSERT_EQ(b[1]->send(0, 9, &eight, 8), tcclSuccess);
  char big[16];
  clearLastError();
  EXPECT_EQ(b[0]->recv(1, 9, big, 16), tcclInvalidUsage);
  std::string err = lastError();
  EXPECT_NE(err.find("expected 16 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("sent 8"), std::string::npos) << err;
  // The bad message was consumed; the next one on the same tag arrives intact.
  ASSERT_EQ(b[1]->send(0, 9, "0123456789abcdef", 16), tcclSuccess);
  ASSERT_EQ(b[0]->recv(1, 9, big, 16), tcclSuccess);
  EXPECT_EQ(std::string(big, 16), "0123456789abcdef");
  // Smaller than sent fails the same way.
  ASSERT_EQ(b[0]->send(1, 2, big, 16), tcclSuccess);
  EXPECT_EQ(b[1]->recv(0, 2, big, 4), tcclInvalidUsage);
}

TEST(BootstrapBadInput, DuplicateRankIsTurnedAway) {
  auto id = newUniqueId();
  // Two threads claim rank 0 of 3, with rank 1; rank 2 comes last, so that both claims reach
  // the root before the communicator is complete. Whichever claim checks in second is refused;
  // the other forms the communicator with ranks 1 and 2.
  std::vector<test::RankResult> res(4);
  std::vector<std::thread> threads;
  const int ranks[4] = {0, 0, 1, 2};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      if (i == 3) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      std::unique_ptr<Bootstrap> b;
      res[i].result = Bootstrap::create(id.data(), ranks[i], 3, &b);
      if (res[i].result == tcclSuccess) res[i].result = b->barrier();
      res[i].lastError = lastError();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(res[2].result, tcclSuccess) << res[2].lastError;
  EXPECT_EQ(res[3].result, tcclSuccess) << res[3].lastError;
  int ok = (res[0].result == tcclSuccess) + (res[1].result == tcclSuccess);
  EXPECT_EQ(ok, 1);
  const auto& loser = res[0].result == tcclSuccess ? res[1] : res[0];
  EXPECT_NE(loser.lastError.find("checked in twice"), std::string::npos) << loser.lastError;
}

TEST(BootstrapBadInput, FrameParser) {
  const uint64_t secret = 0x5ec7e7;
  std::vector<char> frame(sizeof(BootstrapHeader) + 5);
  BootstrapHeader h = makeBootstrapHeader(kMsgUser, secret, 2, 11, 5);
  memcpy(frame.data(), &h, sizeof(h));
  memcpy(frame.data() + sizeof(h), "hello", 5);
  BootstrapHeader out;
  const void* payload = nullptr;
  ASSERT_EQ(parseBootstrapFrame(frame.data(), frame.size(), secret, 4, &out, &payload),
            tcclSuccess);
  EXPECT_EQ(out.tag, 11u);
  EXPECT_EQ(std::string(static_cast<const char*>(payload), 5), "hello");

  EXPECT_NE(parseBootstrapFrame(frame.data(), frame.size() - 1, secret, 4, &out, &payload),
            tcclSuccess)
      << "truncated payload";
  EXPECT_NE(parseBootstrapFrame(frame.data(), 10, secret, 4, &out, &payload), tcclSuccess);
  EXPECT_NE(parseBootstrapFrame(frame.data(), frame.size(), secret + 1, 4, &out, &payload),
            tcclSuccess)
      << "wrong secret";
  EXPECT_NE(parseBootstrapFrame(frame.data(), frame.size(), secret, 2, &out, &payload), tcclSuccess)
      << "rank out of range";
  frame.push_back('!');
  EXPECT_NE(parseBootstrapFrame(frame.data(), frame.size(), secret, 4, &out, &payload), tcclSuccess)
      << "trailing bytes";
  BootstrapHeader big = makeBootstrapHeader(kMsgUser, secret, 0, 0, kMaxBootstrapMessage + 1);
  EXPECT_EQ(checkBootstrapHeader(big, secret, 1, kMaxBootstrapMessage), tcclRemoteError);
  BootstrapHeader magic = h;
  magic.magic ^= 1;
  EXPECT_EQ(checkBootstrapHeader(magic, secret, 4, 100), tcclSystemError);
  BootstrapHeader hello = makeBootstrapHeader(kMsgHello, secret, 0, 0, 0);
  EXPECT_NE(parseBootstrapFrame(&hello, sizeof(hello), secret, 4, &out, &payload), tcclSuccess)
      << "a hello is not a message";
}

}  // namespace
}  // namespace tccl
