/*
 * tests/trace/trace_test.cc: the step timeline (TCCL_TRACE_FILE) seen from the outside.
 *
 * What it is: each test runs a real operation with tracing on, checks its data, destroys the
 * communicator (which writes the trace files), and then has rank 0 run `tools/trace check` on
 * the files of every rank. The checker is the oracle: valid JSON; every rank has the
 * operation, its primitive calls and every step of every connection on both ends; and
 * causality: a consumer never ends its wait for a step before the producer published it
 * (the FIFO protocol, checked from the outside). Two more tests pin the costs and limits:
 * TCCL_TRACE_EVENTS bounds the events and the file counts the dropped ones; a file that
 * cannot be written is a WARN, never a failed operation.
 *
 * The environment (tests/trace/trace_tests.cmake) sets TCCL_TRACE_FILE per CTest test, and
 * TCCL_TRACE_TEST_DIR to the directory the files go to; each test runs alone
 * (--gtest_filter), since the recorder writes every event of the process into one file.
 * Runs on host buffers, and on device buffers with TCCL_TEST_MEM=device (the GPU executor's
 * records travel through its per-block buffers).
 *
 * Added in: stage 1 (observability); the all-reduce case from stage 2.
 */
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "p2p/p2p_patterns.h"  // initWorldComm
#include "tccl.h"
#include "tccl_test/harness.h"

namespace tccl {
namespace test {
namespace {

std::string traceDir() {
  const char* d = std::getenv("TCCL_TRACE_TEST_DIR");
  return d ? d : "";
}

MemKind memKind() { return memKinds().back(); }  // device when TCCL_TEST_MEM asks for it

tcclResult_t initComm(tcclComm_t* comm) { return p2p::initWorldComm(comm); }

/// Rank 0 empties the trace directory before anything is recorded (the files of an earlier
/// run have other pids in their names and would be checked too).
void cleanTraceDir() {
  if (worldRank() == 0 && !traceDir().empty()) {
    const std::string cmd = "mkdir -p '" + traceDir() + "' && rm -f '" + traceDir() + "'/trace.*";
    EXPECT_EQ(std::system(cmd.c_str()), 0);
  }
  barrier();
}

/// After every rank destroyed its communicator: rank 0 runs the checker on all files (with
/// `op` given, every rank must have that operation).
void checkTrace(const std::string& op) {
  barrier();
  int rc = 0;
  if (worldRank() == 0) {
    const std::string cmd = "python3 '" TCCL_TOOLS_DIR "/trace' check" +
                            (op.empty() ? std::string() : " --op " + op) + " --ranks " +
                            std::to_string(worldSize()) + " '" + traceDir() + "'/trace.*";
    rc = std::system(cmd.c_str());
  }
  bcast(&rc, sizeof(rc), 0);
  EXPECT_EQ(rc, 0) << "tools/trace check rejected the trace of " << op << " (see its output)";
}

/// The text of this process's trace file (the one whose header names our pid).
std::string ownTraceFile() {
  const std::string cmd = "grep -l '\"pid\":" + std::to_string(getpid()) + ",\"clock\"' '" +
                          traceDir() + "'/trace.* 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return "";
  char name[4096] = "";
  if (fgets(name, sizeof(name), p) == nullptr) name[0] = '\0';
  pclose(p);
  std::string path(name);
  while (!path.empty() && path.back() == '\n') path.pop_back();
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Every rank sends `bytes` to the next rank and receives from the previous one, in a group:
/// a large message pipelines through the 8 FIFO slots.
void sendRecvRing(tcclComm_t comm, size_t bytes) {
  const int n = worldSize(), r = worldRank();
  Buffer send(bytes, memKind()), recv(bytes, memKind());
  std::vector<uint8_t> in(bytes), out(bytes);
  for (size_t i = 0; i < bytes; i++) in[i] = uint8_t(i * 7 + r);
  send.upload(in.data(), bytes);
  ASSERT_EQ(tcclGroupStart(), tcclSuccess);
  ASSERT_EQ(tcclSend(send.data(), bytes, tcclUint8, (r + 1) % n, comm, nullptr), tcclSuccess);
  ASSERT_EQ(tcclRecv(recv.data(), bytes, tcclUint8, (r + n - 1) % n, comm, nullptr),
            tcclSuccess);
  ASSERT_EQ(tcclGroupEnd(), tcclSuccess);
  deviceSync();
  recv.download(out.data(), bytes);
  const int prev = (r + n - 1) % n;
  for (size_t i = 0; i < bytes; i++) {
    ASSERT_EQ(out[i], uint8_t(i * 7 + prev)) << "byte " << i;
  }
}

TEST(Trace, SendRecvPipelineIsCompleteAndCausal) {
  cleanTraceDir();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initComm(&comm), tcclSuccess) << tcclGetLastError(nullptr);
  // 4 MiB in 512 KiB steps (the default TCCL_BUFFSIZE): 8 steps, twice, so the second send
  // reuses every slot of the first.
  sendRecvRing(comm, size_t(4) << 20);
  sendRecvRing(comm, size_t(4) << 20);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  checkTrace("Send");
}

#if TCCL_STAGE >= 2
TEST(Trace, RingAllReduceIsCompleteAndCausal) {
  cleanTraceDir();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initComm(&comm), tcclSuccess) << tcclGetLastError(nullptr);
  // 1 Mi floats (4 MiB): several chunks and steps per chunk on a ring of any size.
  const size_t count = size_t(1) << 20;
  Buffer send(count * 4, memKind()), recv(count * 4, memKind());
  std::vector<float> in(count), out(count);
  for (size_t i = 0; i < count; i++) in[i] = float(int(i % 1000) + worldRank());
  send.upload(in.data(), count * 4);
  ASSERT_EQ(tcclAllReduce(send.data(), recv.data(), count, tcclFloat32, tcclSum, comm, nullptr),
            tcclSuccess);
  deviceSync();
  recv.download(out.data(), count * 4);
  const int n = worldSize();
  for (size_t i = 0; i < count; i++) {
    ASSERT_EQ(out[i], float(n * int(i % 1000) + n * (n - 1) / 2)) << "element " << i;
  }
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  checkTrace("AllReduce");
}
#endif

// Run with TCCL_TRACE_EVENTS=16: memory stays bounded and the file says what was dropped.
TEST(Trace, EventsAreBoundedAndDropsAreCounted) {
  cleanTraceDir();
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initComm(&comm), tcclSuccess) << tcclGetLastError(nullptr);
  sendRecvRing(comm, size_t(4) << 20);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  const std::string text = ownTraceFile();
  ASSERT_FALSE(text.empty()) << "no trace file of pid " << getpid() << " in " << traceDir();
  EXPECT_NE(text.find("\"events\":16,"), std::string::npos) << "the file keeps 16 events";
  EXPECT_EQ(text.find("\"droppedEvents\":0,"), std::string::npos) << "drops must be counted";
  // What is kept is still valid, with every rank; completeness cannot hold, and which events
  // survive depends on the executor (a GPU's records arrive after its operation's own).
  checkTrace("");
}

// Ranks on different hosts (simulated with TCCL_HOSTID) measure their clock offset to rank 0
// over the bootstrap; rank 0's is 0 by definition. All ranks really share one clock here, so
// a measured offset is pure measurement error, bounded by half a loopback round trip. The
// offset itself may be exactly 0 (a VM whose clock ticks in microseconds), so what shows that
// a rank measured is its count of ping-pongs.
TEST(Trace, ClockOffsetsAreMeasuredAcrossHosts) {
  cleanTraceDir();
  const std::string host = "tccl-trace-test-host-" + std::to_string(worldRank());
  setenv("TCCL_HOSTID", host.c_str(), 1);
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initComm(&comm), tcclSuccess) << tcclGetLastError(nullptr);
  sendRecvRing(comm, size_t(64) << 10);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  unsetenv("TCCL_HOSTID");
  const std::string text = ownTraceFile();
  auto field = [&](const std::string& name) {
    const std::string key = "\"" + name + "\":";
    const size_t at = text.find(key);
    EXPECT_NE(at, std::string::npos) << "no " << name << " in the trace file";
    return at == std::string::npos ? -1.0 : std::strtod(text.c_str() + at + key.size(), nullptr);
  };
  const double offsetUs = field("clockOffsetUs");
  const double errUs = field("clockErrUs");
  const double pings = field("clockPings");
  if (worldRank() == 0) {
    EXPECT_EQ(offsetUs, 0.0);
    EXPECT_EQ(pings, 0.0) << "rank 0 is the reference: it serves the pings";
  } else {
    EXPECT_GT(pings, 0.0) << "rank " << worldRank() << " is on another host, yet measured nothing";
    EXPECT_GE(errUs, 0.0);
    EXPECT_LT(std::abs(offsetUs), 1000.0) << "one clock, yet an offset of " << offsetUs << " us";
    EXPECT_LE(std::abs(offsetUs), errUs + 1.0)
        << "one clock: the offset is measurement error, within the error bound " << errUs;
  }
}

// Run with TCCL_TRACE_FILE in a directory that does not exist.
TEST(Trace, UnwritableFileIsAWarningNotAFailure) {
  tcclComm_t comm = nullptr;
  ASSERT_EQ(initComm(&comm), tcclSuccess) << tcclGetLastError(nullptr);
  sendRecvRing(comm, size_t(64) << 10);
  EXPECT_EQ(tcclCommDestroy(comm), tcclSuccess);
  EXPECT_NE(std::string(tcclGetLastError(nullptr)).find("cannot write the trace file"),
            std::string::npos)
      << "last error: " << tcclGetLastError(nullptr);
}

}  // namespace
}  // namespace test
}  // namespace tccl
