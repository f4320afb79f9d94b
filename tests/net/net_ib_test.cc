/*
 * tests/net/net_ib_test.cc: the verbs Net (transport/net/ib/) against the fake verbs device.
 *
 * What it is: chapter 6's IB code, unit by unit, on any machine (tests/net/fake_verbs.h is the
 * device, behind the IbvApi seam):
 *  - metadata: what the handshake carries is checked (magic and token, MTU, link layer, the
 *    sender's FIFO), and TCCL_IB_HCA's syntax selects ports as NCCL's does;
 *  - GID choice: RoCE v2 with an IPv4 address first, then v2, then v1; a forced index is
 *    taken as it is, one past the table is refused;
 *  - devices: an inactive port is skipped and the Net says why;
 *  - the QP state machine: both ends go RESET -> INIT -> RTR -> RTS with the masks verbs
 *    requires (the fake refuses anything else), on the chosen GID, with TCCL_IB_TIMEOUT and
 *    TCCL_IB_RETRY_CNT; the receiver, in RTS first, posts nothing before the sender's QP is;
 *  - the data path and its flow control: no send before the receiver's ready-to-receive
 *    entry, messages of every size intact, 32 in flight, the 33rd refused until one completes,
 *    a message larger than its receive reported with its size and never written, a closed peer
 *    seen as kNetClosed, and everything freed after close;
 *  - a wrong GID index (run by CTest with TCCL_IB_GID_INDEX=2, a RoCE v1 GID on a v2-only
 *    fabric): the first message fails with status 12 named in words, never a hang.
 *
 * Invariants: both ends run in this process (one thread each where a call could wait); every
 * wait is bounded.
 * NCCL counterpart: none (NCCL's net_ib is tested on hardware).
 * Added in: stage 6.
 */
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fake_verbs.h"
#include "transport/net/ib/net_ib.h"

namespace tccl {
namespace {

using fake::FakeVerbs;

constexpr auto kPatience = std::chrono::seconds(20);

bool waitDone(Net& net, NetRequest* r, size_t* size, tcclResult_t* res = nullptr) {
  const auto until = std::chrono::steady_clock::now() + kPatience;
  for (;;) {
    bool done = false;
    tcclResult_t rc = net.test(r, &done, size);
    if (res) *res = rc;
    if (rc != tcclSuccess) return false;
    if (done) return true;
    if (std::chrono::steady_clock::now() > until) return false;
  }
}

/// A connected pair over one IbNet on a fake device (the sender's second connect() call takes
/// the receiver's answer, as transport.cc's phase 5 does).
struct IbPair {
  std::unique_ptr<FakeVerbs> verbs;
  std::unique_ptr<IbNet> net;
  NetSendComm* send = nullptr;
  NetRecvComm* recv = nullptr;

  explicit IbPair(fake::Options o = fake::roceOptions()) {
    verbs = std::make_unique<FakeVerbs>(std::move(o));
    net = std::make_unique<IbNet>(&verbs->api());
    if (net->devices() != 1) return;
    NetHandle handle;
    NetListenComm* listen = nullptr;
    EXPECT_EQ(net->listen(0, &handle, &listen), tcclSuccess);
    EXPECT_EQ(net->connect(0, &handle, &send), tcclSuccess);  // phase 3: starts only
    EXPECT_EQ(send, nullptr) << "connect finished without the receiver's answer";
    EXPECT_EQ(net->accept(listen, &recv), tcclSuccess);      // phase 4
    const auto until = std::chrono::steady_clock::now() + kPatience;
    while (send == nullptr && std::chrono::steady_clock::now() < until) {  // phase 5
      if (net->connect(0, &handle, &send) != tcclSuccess) break;
    }
    EXPECT_NE(send, nullptr);
    EXPECT_NE(recv, nullptr);
    net->closeListen(listen);
  }
  ~IbPair() { close(); }
  void close() {
    if (send) net->closeSend(send);
    if (recv) net->closeRecv(recv);
    send = nullptr;
    recv = nullptr;
  }
  /// A registered buffer.
  struct Buf {
    std::vector<uint8_t> bytes;
    NetMr* mr = nullptr;
  };
  std::unique_ptr<Buf> buffer(size_t n, uint8_t fill, bool forSend) {
    auto b = std::make_unique<Buf>();
    b->bytes.assign(std::max<size_t>(n, 1), fill);
    EXPECT_EQ(net->regMr(forSend ? send : nullptr, forSend ? nullptr : recv, b->bytes.data(),
                         b->bytes.size(), NetMemType::kHost, &b->mr),
              tcclSuccess);
    return b;
  }
  void release(Buf& b, bool forSend) {
    net->deregMr(forSend ? send : nullptr, forSend ? nullptr : recv, b.mr);
  }
};

IbQpInfo goodInfo(uint64_t token) {
  IbQpInfo i{};
  i.magic = 0x7cc11b0000000002ull;
  i.token = token;
  i.qpn = 17;
  i.linkLayer = IBV_LINK_LAYER_ETHERNET;
  i.mtu = IBV_MTU_1024;
  i.fifoAddr = 0x1000;
  i.fifoRkey = 5;
  return i;
}

TEST(NetIbMetadata, HandshakeInfoIsChecked) {
  const IbQpInfo good = goodInfo(42);
  EXPECT_EQ(checkIbQpInfo(good, 42, true), tcclSuccess);
  EXPECT_NE(checkIbQpInfo(good, 43, true), tcclSuccess) << "another listener's token";
  IbQpInfo bad = good;
  bad.magic ^= 1;
  EXPECT_NE(checkIbQpInfo(bad, 42, true), tcclSuccess);
  bad = good;
  bad.mtu = 0;
  EXPECT_NE(checkIbQpInfo(bad, 42, true), tcclSuccess);
  bad.mtu = 6;
  EXPECT_NE(checkIbQpInfo(bad, 42, true), tcclSuccess);
  bad = good;
  bad.linkLayer = 7;
  EXPECT_NE(checkIbQpInfo(bad, 42, true), tcclSuccess);
  bad = good;
  bad.fifoAddr = 0;
  EXPECT_NE(checkIbQpInfo(bad, 42, true), tcclSuccess) << "a sender without a FIFO";
  EXPECT_EQ(checkIbQpInfo(bad, 42, false), tcclSuccess) << "a receiver needs none";
  bad.fifoAddr = 0x1004;
  EXPECT_NE(checkIbQpInfo(bad, 42, true), tcclSuccess) << "a misaligned FIFO";
}

TEST(NetIbMetadata, HcaSelection) {
  EXPECT_TRUE(ibHcaSelected("", "mlx5_0", 1));
  EXPECT_TRUE(ibHcaSelected("mlx5", "mlx5_3", 2));         // a prefix
  EXPECT_TRUE(ibHcaSelected("mlx5_1", "mlx5_10", 1));      // ... even this one
  EXPECT_FALSE(ibHcaSelected("=mlx5_1", "mlx5_10", 1));    // "=": exact names
  EXPECT_TRUE(ibHcaSelected("=mlx5_1", "mlx5_1", 1));
  EXPECT_TRUE(ibHcaSelected("mlx5_0:1,rxe0", "rxe0", 1));
  EXPECT_FALSE(ibHcaSelected("mlx5_0:1", "mlx5_0", 2));    // another port
  EXPECT_FALSE(ibHcaSelected("^rxe", "rxe0", 1));          // excluded
  EXPECT_TRUE(ibHcaSelected("^rxe", "mlx5_0", 1));
  EXPECT_FALSE(ibHcaSelected("^=mlx5_0:1", "mlx5_0", 1));
  EXPECT_TRUE(ibHcaSelected("^=mlx5_0:1", "mlx5_0", 2));
}

TEST(NetIbGid, RoceV2WithIpv4First) {
  FakeVerbs verbs(fake::roceOptions());  // [ll v1, ll v2, ipv4 v1, ipv4 v2]
  const IbvApi& api = verbs.api();
  int n = 0;
  ibv_context* ctx = api.openDevice(api.getDeviceList(&n)[0]);
  EXPECT_EQ(ibChooseGid(api, ctx, 1, 4, -1), 3);
  EXPECT_EQ(ibChooseGid(api, ctx, 1, 4, 1), 1) << "TCCL_IB_GID_INDEX is taken as it is";
  EXPECT_EQ(ibChooseGid(api, ctx, 1, 4, 4), -1) << "past the table";
  api.closeDevice(ctx);
}

TEST(NetIbGid, ThenRoutableV2ThenV1) {
  fake::Options o;
  ibv_gid v6{};
  v6.raw[0] = 0x20;
  v6.raw[15] = 1;
  o.gids = {{fake::linkLocalGid(1), GidType::kIbRoceV1},
            {fake::linkLocalGid(1), GidType::kRoceV2},
            {v6, GidType::kRoceV2}};
  FakeVerbs verbs(o);
  int n = 0;
  ibv_context* ctx = verbs.api().openDevice(verbs.api().getDeviceList(&n)[0]);
  EXPECT_EQ(ibChooseGid(verbs.api(), ctx, 1, 3, -1), 2);  // a global IPv6 v2 GID
  EXPECT_EQ(ibChooseGid(verbs.api(), ctx, 1, 2, -1), 0);  // link-local v2 never; v1 then
  verbs.api().closeDevice(ctx);
}

TEST(NetIbDevices, InactivePortIsSkippedWithAReason) {
  fake::Options o = fake::roceOptions();
  o.portState = IBV_PORT_DOWN;
  FakeVerbs verbs(o);
  IbNet net(&verbs.api());
  EXPECT_EQ(net.devices(), 0);
  EXPECT_NE(net.whyNone().find("no active port"), std::string::npos) << net.whyNone();
  IbNet none(nullptr, "libibverbs not loaded: test");
  EXPECT_EQ(none.devices(), 0);
  EXPECT_NE(none.whyNone().find("libibverbs"), std::string::npos);
}

TEST(NetIbQp, BothEndsWalkTheStateMachine) {
  if (getenv("TCCL_IB_GID_INDEX")) GTEST_SKIP() << "runs with the default GID choice";
  IbPair p;
  ASSERT_NE(p.send, nullptr);
  NetProperties props;
  ASSERT_EQ(p.net->getProperties(0, &props), tcclSuccess);
  EXPECT_STREQ(props.name, "fake0:1");
  EXPECT_FALSE(props.anyHostMemory) << "verbs reach registered memory only";
  const auto qps = p.verbs->qps();
  ASSERT_EQ(qps.size(), 2u);
  for (const fake::QpRecord& q : qps) {
    const std::vector<std::string> want = {"RESET->INIT", "INIT->RTR", "RTR->RTS"};
    EXPECT_EQ(q.transitions, want) << "QP " << q.qpn;
    EXPECT_EQ(q.sgidIndex, 3) << "the RoCE v2 IPv4 GID";
    EXPECT_EQ(q.timeout, 20);
    EXPECT_EQ(q.retryCnt, 7);
    EXPECT_TRUE(q.accessFlags & IBV_ACCESS_REMOTE_WRITE);
  }
}

TEST(NetIbQp, ReceiverPostsNothingBeforeTheSenderIsReady) {
  if (getenv("TCCL_IB_GID_INDEX")) GTEST_SKIP() << "runs with the default GID choice";
  // The receiver reaches RTS in accept(), before the sender's QP leaves INIT (its second
  // connect() call): an entry written then would hit a QP that drops it (the fake fails such
  // a write with status 12). So irecv waits for the sender's "ready" byte.
  FakeVerbs verbs(fake::roceOptions());
  IbNet net(&verbs.api());
  ASSERT_EQ(net.devices(), 1);
  NetHandle handle;
  NetListenComm* listen = nullptr;
  NetSendComm* send = nullptr;
  NetRecvComm* recv = nullptr;
  ASSERT_EQ(net.listen(0, &handle, &listen), tcclSuccess);
  ASSERT_EQ(net.connect(0, &handle, &send), tcclSuccess);
  ASSERT_EQ(net.accept(listen, &recv), tcclSuccess);
  ASSERT_NE(recv, nullptr);
  std::vector<uint8_t> dst(64, 0), src(64, 9);
  NetMr *dmr = nullptr, *smr = nullptr;
  ASSERT_EQ(net.regMr(nullptr, recv, dst.data(), dst.size(), NetMemType::kHost, &dmr),
            tcclSuccess);
  NetRequest* r = nullptr;
  ASSERT_EQ(net.irecv(recv, dst.data(), 64, dmr, &r), tcclSuccess);
  EXPECT_EQ(r, nullptr) << "a receive posted while the sender's QP is not ready";
  const auto until = std::chrono::steady_clock::now() + kPatience;
  while (send == nullptr && std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(net.connect(0, &handle, &send), tcclSuccess);
  }
  ASSERT_NE(send, nullptr);
  ASSERT_EQ(net.regMr(send, nullptr, src.data(), src.size(), NetMemType::kHost, &smr),
            tcclSuccess);
  for (int i = 0; i < 1000 && r == nullptr; i++) {
    ASSERT_EQ(net.irecv(recv, dst.data(), 64, dmr, &r), tcclSuccess);
  }
  ASSERT_NE(r, nullptr) << "the sender said it was ready";
  NetRequest* s = nullptr;
  ASSERT_EQ(net.isend(send, src.data(), 64, smr, &s), tcclSuccess);
  ASSERT_NE(s, nullptr);
  size_t got = 0;
  EXPECT_TRUE(waitDone(net, s, nullptr));
  EXPECT_TRUE(waitDone(net, r, &got));
  EXPECT_EQ(dst, src);
  net.deregMr(send, nullptr, smr);
  net.deregMr(nullptr, recv, dmr);
  net.closeSend(send);
  net.closeRecv(recv);
  net.closeListen(listen);
}

TEST(NetIbData, FlowControlSizesAndOrder) {
  if (getenv("TCCL_IB_GID_INDEX")) GTEST_SKIP() << "runs with the default GID choice";
  IbPair p;
  ASSERT_NE(p.send, nullptr);
  const size_t sizes[] = {0, 1, 4096, 100000, 7};
  auto src = p.buffer(100000, 0, true);
  auto dst = p.buffer(100000 + 64, 0, false);
  for (size_t i = 0; i < std::size(sizes); i++) {
    for (size_t j = 0; j < sizes[i]; j++) src->bytes[j] = uint8_t(j * 7 + i);
    std::fill(dst->bytes.begin(), dst->bytes.end(), 0xEE);
    // Flow control: the receiver has announced nothing, so nothing can be sent.
    NetRequest* s = nullptr;
    ASSERT_EQ(p.net->isend(p.send, src->bytes.data(), sizes[i], src->mr, &s), tcclSuccess);
    EXPECT_EQ(s, nullptr) << "a send before the receiver's ready-to-receive entry";
    NetRequest* r = nullptr;
    ASSERT_EQ(p.net->irecv(p.recv, dst->bytes.data(), sizes[i] + 64, dst->mr, &r), tcclSuccess);
    ASSERT_NE(r, nullptr);
    ASSERT_EQ(p.net->isend(p.send, src->bytes.data(), sizes[i], src->mr, &s), tcclSuccess);
    ASSERT_NE(s, nullptr) << "message " << i;
    size_t got = 0;
    ASSERT_TRUE(waitDone(*p.net, s, nullptr));
    ASSERT_TRUE(waitDone(*p.net, r, &got));
    EXPECT_EQ(got, sizes[i]);
    EXPECT_EQ(memcmp(src->bytes.data(), dst->bytes.data(), sizes[i]), 0) << "message " << i;
    EXPECT_EQ(dst->bytes[sizes[i]], 0xEE) << "written past the message";
  }
  // Larger than the receive: reported with its size, nothing written.
  std::fill(dst->bytes.begin(), dst->bytes.end(), 0xEE);
  NetRequest *r = nullptr, *s = nullptr;
  ASSERT_EQ(p.net->irecv(p.recv, dst->bytes.data(), 100, dst->mr, &r), tcclSuccess);
  ASSERT_EQ(p.net->isend(p.send, src->bytes.data(), 5000, src->mr, &s), tcclSuccess);
  ASSERT_NE(s, nullptr);
  size_t got = 0;
  ASSERT_TRUE(waitDone(*p.net, s, nullptr));
  ASSERT_TRUE(waitDone(*p.net, r, &got));
  EXPECT_EQ(got, 5000u);
  EXPECT_EQ(dst->bytes[0], 0xEE) << "a too-large message was written";
  p.release(*src, true);
  p.release(*dst, false);
}

TEST(NetIbData, ThirtyTwoInFlightAndInOrder) {
  if (getenv("TCCL_IB_GID_INDEX")) GTEST_SKIP() << "runs with the default GID choice";
  IbPair p;
  ASSERT_NE(p.send, nullptr);
  constexpr int kMsgs = 32;
  auto src = p.buffer(kMsgs * 64, 0, true);
  auto dst = p.buffer(kMsgs * 64, 0, false);
  for (int i = 0; i < kMsgs * 64; i++) src->bytes[size_t(i)] = uint8_t(i / 64);
  std::vector<NetRequest*> recvs, sends;
  for (int i = 0; i < kMsgs; i++) {
    NetRequest* r = nullptr;
    ASSERT_EQ(p.net->irecv(p.recv, dst->bytes.data() + i * 64, 64, dst->mr, &r), tcclSuccess);
    ASSERT_NE(r, nullptr) << i;
    recvs.push_back(r);
  }
  NetRequest* extra = nullptr;
  ASSERT_EQ(p.net->irecv(p.recv, dst->bytes.data(), 64, dst->mr, &extra), tcclSuccess);
  EXPECT_EQ(extra, nullptr) << "a 33rd receive while 32 are in flight";
  for (int i = 0; i < kMsgs; i++) {
    NetRequest* s = nullptr;
    ASSERT_EQ(p.net->isend(p.send, src->bytes.data() + i * 64, 64, src->mr, &s), tcclSuccess);
    ASSERT_NE(s, nullptr) << i;
    sends.push_back(s);
  }
  for (int i = 0; i < kMsgs; i++) {
    size_t got = 0;
    ASSERT_TRUE(waitDone(*p.net, sends[size_t(i)], nullptr));
    ASSERT_TRUE(waitDone(*p.net, recvs[size_t(i)], &got));
    EXPECT_EQ(got, 64u);
  }
  EXPECT_EQ(src->bytes, dst->bytes);
  p.release(*src, true);
  p.release(*dst, false);
}

TEST(NetIbData, ClosedPeerAndEverythingFreed) {
  if (getenv("TCCL_IB_GID_INDEX")) GTEST_SKIP() << "runs with the default GID choice";
  auto p = std::make_unique<IbPair>();
  ASSERT_NE(p->send, nullptr);
  auto dst = p->buffer(64, 0, false);
  NetRequest* r = nullptr;
  ASSERT_EQ(p->net->irecv(p->recv, dst->bytes.data(), 64, dst->mr, &r), tcclSuccess);
  p->net->closeSend(p->send);
  p->send = nullptr;
  size_t got = 0;
  ASSERT_TRUE(waitDone(*p->net, r, &got));
  EXPECT_EQ(got, kNetClosed);
  p->release(*dst, false);
  p->close();
  FakeVerbs* verbs = p->verbs.get();
  EXPECT_EQ(verbs->liveObjects(), 2) << "a closed pair leaves only the device's context and PD";
  p->net.reset();
  EXPECT_EQ(verbs->liveObjects(), 0);
}

TEST(NetIbWrongGid, FirstMessageFailsWithStatus12) {
  if (!getenv("TCCL_IB_GID_INDEX")) GTEST_SKIP() << "CTest runs this with TCCL_IB_GID_INDEX=2";
  IbPair p;  // both ends on GID 2, a RoCE v1 one: the v2-only fabric does not route it
  ASSERT_NE(p.send, nullptr) << "the QPs connect: a wrong GID shows only when data moves";
  auto src = p.buffer(64, 1, true);
  auto dst = p.buffer(64, 0, false);
  NetRequest *r = nullptr, *s = nullptr;
  ASSERT_EQ(p.net->irecv(p.recv, dst->bytes.data(), 64, dst->mr, &r), tcclSuccess);
  ASSERT_NE(r, nullptr);
  // The entry's own RDMA write already fails on the receiver's side.
  tcclResult_t rc = tcclSuccess;
  EXPECT_FALSE(waitDone(*p.net, r, nullptr, &rc));
  EXPECT_EQ(rc, tcclRemoteError);
  const std::string why = lastError();
  EXPECT_NE(why.find("transport retry counter exceeded (12)"), std::string::npos) << why;
  EXPECT_NE(why.find("QP"), std::string::npos) << why;
  EXPECT_NE(why.find("peer"), std::string::npos) << why;
  (void)s;
  p.release(*src, true);
  p.release(*dst, false);
}

}  // namespace
}  // namespace tccl
