/*
 * tests/fuzz/fuzz_socket_address.cc: fuzzes SocketAddress::parse.
 *
 * What it checks: parsing any text (TCCL_COMM_ID, MASTER_ADDR:MASTER_PORT come from users)
 * never crashes, and an accepted address prints (toString) as text that parses back to the
 * same address.
 * Host names would make each input a DNS query, so getaddrinfo is interposed below to accept
 * numeric hosts only; name resolution itself is libc's business, the splitting of host and
 * port around it is ours.
 *
 * NCCL counterpart: none.
 * Added in: foundation (common/).
 */
#include <dlfcn.h>
#include <netdb.h>

#include <cstdint>
#include <cstdlib>
#include <string>

#include "tccl/common/socket.h"

// Numeric-only getaddrinfo: this definition in the executable wins over libc's (and over the
// sanitizer's weak interceptor); the real one is found with RTLD_NEXT.
extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** res) {
  using Fn = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "getaddrinfo"));
  struct addrinfo h = {};
  if (hints != nullptr) h = *hints;
  h.ai_flags |= AI_NUMERICHOST;
  return real(node, service, &h, res);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tccl;
  std::string text(reinterpret_cast<const char*>(data), size);
  SocketAddress a;
  if (SocketAddress::parse(text, &a) != tcclSuccess) {
    if (a.valid()) abort();  // a failed parse leaves the output alone
    return 0;
  }
  if (a.family() != AF_INET && a.family() != AF_INET6) abort();
  std::string printed = a.toString();
  SocketAddress b;
  if (SocketAddress::parse(printed, &b) != tcclSuccess) abort();
  if (b.toString() != printed || b.port() != a.port()) abort();
  return 0;
}
