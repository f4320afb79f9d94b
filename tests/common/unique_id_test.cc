/*
 * tests/common/unique_id_test.cc: the opaque unique id and the three ways to get one.
 *
 * What it checks: encode/decode round trips (IPv4, IPv6, flags); every single-byte change and
 * plain garbage is rejected with a WARN; tcclGetUniqueId's two paths (a root in this process,
 * TCCL_COMM_ID) and the torchrun environment path, including its error messages.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bootstrap_test_util.h"
#include "tccl/common/bootstrap.h"
#include "tccl/common/debug.h"

namespace tccl {
namespace {

using test::ScopedEnv;

UniqueIdData sample(const char* addr, uint64_t secret, bool startRoot) {
  UniqueIdData d;
  EXPECT_EQ(SocketAddress::parse(addr, &d.root), tcclSuccess);
  d.secret = secret;
  d.startRoot = startRoot;
  return d;
}

TEST(UniqueId, RoundTrip) {
  for (const char* addr : {"10.1.2.3:29500", "[fd00::2]:1", "[::1]:65535"}) {
    for (bool startRoot : {false, true}) {
      UniqueIdData in = sample(addr, 0x0123456789abcdefull, startRoot), out;
      std::vector<char> id(kUniqueIdBytes);
      ASSERT_EQ(encodeUniqueId(in, id.data()), tcclSuccess);
      ASSERT_EQ(decodeUniqueId(id.data(), &out), tcclSuccess);
      EXPECT_EQ(out.root.toString(), addr);
      EXPECT_EQ(out.root.len, in.root.len);
      EXPECT_EQ(out.secret, in.secret);
      EXPECT_EQ(out.startRoot, startRoot);
    }
  }
}

TEST(UniqueId, EncodeRejectsUnusableAddress) {
  UniqueIdData d;
  std::vector<char> id(kUniqueIdBytes);
  EXPECT_EQ(encodeUniqueId(d, id.data()), tcclInvalidArgument);
  d = sample("1.2.3.4", 1, false);  // port 0
  EXPECT_EQ(encodeUniqueId(d, id.data()), tcclInvalidArgument);
}

TEST(UniqueId, RejectsGarbage) {
  UniqueIdData out;
  std::vector<char> zeros(kUniqueIdBytes, 0);
  clearLastError();
  EXPECT_EQ(decodeUniqueId(zeros.data(), &out), tcclInvalidArgument);
  EXPECT_NE(std::string(lastError()).find("invalid unique id"), std::string::npos);
  std::mt19937_64 rng(42);
  for (int i = 0; i < 1000; ++i) {
    std::vector<char> junk(kUniqueIdBytes);
    for (auto& c : junk) c = static_cast<char>(rng());
    EXPECT_EQ(decodeUniqueId(junk.data(), &out), tcclInvalidArgument);
  }
}

TEST(UniqueId, EverySingleByteChangeIsDetected) {
  std::vector<char> id(kUniqueIdBytes);
  ASSERT_EQ(encodeUniqueId(sample("[fd00::2]:4242", 77, true), id.data()), tcclSuccess);
  UniqueIdData out;
  for (size_t i = 0; i < kUniqueIdBytes; ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::vector<char> bad = id;
      bad[i] ^= static_cast<char>(1 << bit);
      EXPECT_EQ(decodeUniqueId(bad.data(), &out), tcclInvalidArgument) << "byte " << i;
    }
  }
}

TEST(UniqueId, GetUniqueIdStartsARoot) {
  unsetenv("TCCL_COMM_ID");
  std::vector<char> a(kUniqueIdBytes), b(kUniqueIdBytes);
  ASSERT_EQ(bootstrapGetUniqueId(a.data()), tcclSuccess);
  ASSERT_EQ(bootstrapGetUniqueId(b.data()), tcclSuccess);
  UniqueIdData da, db;
  ASSERT_EQ(decodeUniqueId(a.data(), &da), tcclSuccess);
  ASSERT_EQ(decodeUniqueId(b.data(), &db), tcclSuccess);
  EXPECT_FALSE(da.startRoot);
  EXPECT_NE(da.root.port(), 0);
  EXPECT_NE(da.secret, db.secret) << "secrets are random";
  EXPECT_NE(da.root.toString(), db.root.toString()) << "each id has its own root";
  // The root really listens there.
  Socket probe;
  EXPECT_EQ(probe.connect(da.root, deadlineIn(5)), tcclSuccess);
}

TEST(UniqueId, CommIdIsDeterministic) {
  ScopedEnv comm("TCCL_COMM_ID", "127.0.0.1:29555");
  std::vector<char> a(kUniqueIdBytes), b(kUniqueIdBytes);
  ASSERT_EQ(bootstrapGetUniqueId(a.data()), tcclSuccess);
  ASSERT_EQ(bootstrapGetUniqueId(b.data()), tcclSuccess);
  EXPECT_EQ(a, b) << "every rank can compute the same id on its own";
  UniqueIdData d;
  ASSERT_EQ(decodeUniqueId(a.data(), &d), tcclSuccess);
  EXPECT_TRUE(d.startRoot);
  EXPECT_EQ(d.root.toString(), "127.0.0.1:29555");
  ScopedEnv secret("TCCL_BOOTSTRAP_SECRET", "hunter2");
  ASSERT_EQ(bootstrapGetUniqueId(b.data()), tcclSuccess);
  UniqueIdData e;
  ASSERT_EQ(decodeUniqueId(b.data(), &e), tcclSuccess);
  EXPECT_NE(d.secret, e.secret) << "TCCL_BOOTSTRAP_SECRET changes the secret";
}

TEST(UniqueId, CommIdErrors) {
  std::vector<char> id(kUniqueIdBytes);
  {
    ScopedEnv comm("TCCL_COMM_ID", "127.0.0.1");
    clearLastError();
    EXPECT_EQ(bootstrapGetUniqueId(id.data()), tcclInvalidArgument);
    EXPECT_NE(std::string(lastError()).find("TCCL_COMM_ID"), std::string::npos) << lastError();
  }
  ScopedEnv comm("TCCL_COMM_ID", "[::1");
  EXPECT_EQ(bootstrapGetUniqueId(id.data()), tcclInvalidArgument);
}

TEST(UniqueId, FromTorchrunEnvironment) {
  ScopedEnv addr("MASTER_ADDR", "::1");
  ScopedEnv port("MASTER_PORT", "29600");
  ScopedEnv size("WORLD_SIZE", "4");
  ScopedEnv rank("RANK", "3");
  std::vector<char> id(kUniqueIdBytes);
  int r = -1, n = -1;
  ASSERT_EQ(bootstrapIdFromEnv(id.data(), &r, &n), tcclSuccess);
  EXPECT_EQ(r, 3);
  EXPECT_EQ(n, 4);
  UniqueIdData d;
  ASSERT_EQ(decodeUniqueId(id.data(), &d), tcclSuccess);
  EXPECT_EQ(d.root.toString(), "[::1]:29600");
  EXPECT_TRUE(d.startRoot);
  // Another rank computes the same id.
  setenv("RANK", "0", 1);
  std::vector<char> id0(kUniqueIdBytes);
  ASSERT_EQ(bootstrapIdFromEnv(id0.data(), &r, &n), tcclSuccess);
  EXPECT_EQ(r, 0);
  EXPECT_EQ(id0, id);
}

TEST(UniqueId, FromEnvironmentErrors) {
  unsetenv("RANK");
  unsetenv("MASTER_PORT");
  ScopedEnv addr("MASTER_ADDR", "127.0.0.1");
  ScopedEnv size("WORLD_SIZE", "2");
  std::vector<char> id(kUniqueIdBytes);
  int r = 0, n = 0;
  clearLastError();
  EXPECT_EQ(bootstrapIdFromEnv(id.data(), &r, &n), tcclInvalidArgument);
  std::string err = lastError();
  EXPECT_NE(err.find(": RANK, MASTER_PORT not set"), std::string::npos)
      << "exactly the missing variables are listed: " << err;
  ScopedEnv port("MASTER_PORT", "29601");
  ScopedEnv rank("RANK", "2");  // out of range for WORLD_SIZE=2
  EXPECT_EQ(bootstrapIdFromEnv(id.data(), &r, &n), tcclInvalidArgument);
  setenv("RANK", "x", 1);
  EXPECT_EQ(bootstrapIdFromEnv(id.data(), &r, &n), tcclInvalidArgument);
  setenv("RANK", "1", 1);
  setenv("WORLD_SIZE", "0", 1);
  EXPECT_EQ(bootstrapIdFromEnv(id.data(), &r, &n), tcclInvalidArgument);
}

}  // namespace
}  // namespace tccl
