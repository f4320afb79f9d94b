/*
 * common/src/socket_address.cc: socket addresses, the choice of interface, host identity.
 *
 * What it is: parsing and printing IPv4/IPv6 addresses ("1.2.3.4:5", "[fd00::2]:5", host
 * names), picking the interface to listen on (TCCL_SOCKET_IFNAME with NCCL's syntax,
 * TCCL_SOCKET_FAMILY), and the helpers that identify this host and make secrets.
 *
 * Invariants:
 *  - parse() accepts exactly "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6
 *    address, with a port of 0..65535; anything else is tcclInvalidArgument with a WARN, and
 *    *out is left untouched.
 *  - findInterfaceAddress never returns an IPv6 link-local address (its scope differs between
 *    hosts, so no other host could use it) and returns port 0.
 *
 * NCCL counterpart: src/misc/socket.cc (ncclSocketGetAddrFromString, ncclFindInterfaces,
 * matchIfList), src/misc/utils.cc (getHostName, getHostHash).
 * Added in: foundation (common/).
 */
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "tccl/common/debug.h"
#include "tccl/common/param.h"
#include "tccl/common/socket.h"

namespace tccl {

// ---- SocketAddress --------------------------------------------------------------------------

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
  if (family() == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN + IF_NAMESIZE + 2] = "";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, host,
              sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(&storage);
    inet_ntop(AF_INET6, &sa->sin6_addr, host, sizeof(host));
    std::string text = std::string("[") + host;
    if (sa->sin6_scope_id != 0) text += "%" + std::to_string(sa->sin6_scope_id);
    return text + "]:" + std::to_string(port());
  }
  return "<unset address>";
}

tcclResult_t SocketAddress::parse(const std::string& text, SocketAddress* out) {
  TCCL_ARG_CHECK(out != nullptr, "SocketAddress::parse: out is null");
  // Split host and port: "[v6]:port", "[v6]", "host:port", "host", or a bare v6 address
  // (two or more colons and no brackets: the whole string is the host, port 0).
  std::string host, port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    TCCL_ARG_CHECK(close != std::string::npos, "invalid address \"%s\": missing ']'", text.c_str());
    host = text.substr(1, close - 1);
    std::string rest = text.substr(close + 1);
    TCCL_ARG_CHECK(rest.empty() || rest[0] == ':',
                   "invalid address \"%s\": expected ':port' after ']'", text.c_str());
    if (!rest.empty()) port = rest.substr(1);
  } else {
    size_t colon = text.find(':');
    if (colon != std::string::npos && text.find(':', colon + 1) == std::string::npos) {
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
    } else {
      host = text;
    }
  }
  TCCL_ARG_CHECK(!host.empty(), "invalid address \"%s\": empty host", text.c_str());
  TCCL_ARG_CHECK(host.find('\0') == std::string::npos, "invalid address: NUL in the host");
  TCCL_ARG_CHECK(host.size() < 256, "invalid address: host name longer than 255 characters");
  unsigned long portValue = 0;
  if (!port.empty() || (!text.empty() && text.back() == ':')) {
    bool digits = !port.empty() && port.size() <= 5 &&
                  port.find_first_not_of("0123456789") == std::string::npos;
    if (digits) portValue = strtoul(port.c_str(), nullptr, 10);
    TCCL_ARG_CHECK(digits && portValue <= 65535, "invalid port in address \"%s\"", text.c_str());
  }

  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  std::string familyName = getEnvString("TCCL_SOCKET_FAMILY");
  hints.ai_family = familyName == "AF_INET"    ? AF_INET
                    : familyName == "AF_INET6" ? AF_INET6
                                               : AF_UNSPEC;
  addrinfo* res = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 && hints.ai_family != AF_UNSPEC) {  // e.g. an IPv4 literal with AF_INET6 asked
    hints.ai_family = AF_UNSPEC;
    rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  }
  TCCL_ARG_CHECK(rc == 0, "cannot resolve \"%s\": %s", host.c_str(), gai_strerror(rc));
  const addrinfo* pick = nullptr;
  for (const addrinfo* a = res; a != nullptr && pick == nullptr; a = a->ai_next)
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) &&
        a->ai_addrlen <= sizeof(out->storage))
      pick = a;
  if (pick == nullptr) {
    freeaddrinfo(res);
    TCCL_WARN("\"%s\" has no IPv4 or IPv6 address", host.c_str());
    return tcclInvalidArgument;
  }
  SocketAddress addr;
  memcpy(&addr.storage, pick->ai_addr, pick->ai_addrlen);
  addr.len = static_cast<uint32_t>(pick->ai_addrlen);
  addr.setPort(static_cast<uint16_t>(portValue));
  freeaddrinfo(res);
  *out = addr;
  return tcclSuccess;
}

// ---- interfaces -----------------------------------------------------------------------------

namespace {

// NCCL's TCCL_SOCKET_IFNAME syntax: "eth,ib" prefixes; "=eth0" exact names; "^lo,docker"
// everything but (may combine: "^=eth0").
struct IfFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<std::string> names;

  explicit IfFilter(std::string spec) {
    if (!spec.empty() && spec[0] == '^') {
      exclude = true;
      spec.erase(0, 1);
    }
    if (!spec.empty() && spec[0] == '=') {
      exact = true;
      spec.erase(0, 1);
    }
    size_t pos = 0;
    while (pos <= spec.size()) {
      size_t comma = spec.find(',', pos);
      if (comma == std::string::npos) comma = spec.size();
      if (comma > pos) names.push_back(spec.substr(pos, comma - pos));
      pos = comma + 1;
    }
  }
  bool matches(const char* ifname) const {
    bool hit = false;
    for (const auto& n : names)
      hit = hit || (exact ? n == ifname : strncmp(ifname, n.c_str(), n.size()) == 0);
    return exclude ? !hit : hit;
  }
};

// IPv6 link-local addresses only work together with a scope that differs between hosts: skip.
bool usable(const ifaddrs* ifa, int family) {
  if (ifa->ifa_addr == nullptr || !(ifa->ifa_flags & IFF_UP)) return false;
  if (ifa->ifa_addr->sa_family != family) return false;
  if (family == AF_INET6) {
    const auto* sa = reinterpret_cast<const sockaddr_in6*>(ifa->ifa_addr);
    if (IN6_IS_ADDR_LINKLOCAL(&sa->sin6_addr)) return false;
  }
  return true;
}

}  // namespace

tcclResult_t findInterfaceAddress(SocketAddress* out) {
  TCCL_ARG_CHECK(out != nullptr, "findInterfaceAddress: out is null");
  std::string familyName = getEnvString("TCCL_SOCKET_FAMILY");
  std::vector<int> families = {AF_INET, AF_INET6};  // IPv4 first when both are allowed
  if (familyName == "AF_INET")
    families = {AF_INET};
  else if (familyName == "AF_INET6")
    families = {AF_INET6};
  else if (!familyName.empty())
    TCCL_WARN("TCCL_SOCKET_FAMILY=%s is not AF_INET or AF_INET6; ignoring it", familyName.c_str());
  std::string ifname = getEnvString("TCCL_SOCKET_IFNAME");

  ifaddrs* list = nullptr;
  TCCL_SYS_CHECK(getifaddrs(&list), "getifaddrs");
  const ifaddrs* pick = nullptr;
  if (!ifname.empty()) {
    IfFilter filter(ifname);
    for (int family : families)
      for (const ifaddrs* a = list; a != nullptr && pick == nullptr; a = a->ifa_next)
        if (usable(a, family) && filter.matches(a->ifa_name)) pick = a;
  } else {
    // Default: like NCCL's "^docker,lo": a real interface first, loopback as the last resort.
    IfFilter notDocker("^docker");
    for (int pass = 0; pass < 2 && pick == nullptr; ++pass)
      for (int family : families)
        for (const ifaddrs* a = list; a != nullptr && pick == nullptr; a = a->ifa_next) {
          bool loop = (a->ifa_flags & IFF_LOOPBACK) != 0;
          if (usable(a, family) && loop == (pass == 1) && notDocker.matches(a->ifa_name)) pick = a;
        }
  }
  if (pick == nullptr) {
    freeifaddrs(list);
    TCCL_WARN("no usable network interface (TCCL_SOCKET_IFNAME=%s, TCCL_SOCKET_FAMILY=%s)",
              ifname.empty() ? "<unset>" : ifname.c_str(),
              familyName.empty() ? "<unset>" : familyName.c_str());
    return tcclSystemError;
  }
  SocketAddress addr;
  addr.len = pick->ifa_addr->sa_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
  memcpy(&addr.storage, pick->ifa_addr, addr.len);
  addr.setPort(0);
  TCCL_INFO(kInit, "using interface %s address %s", pick->ifa_name, addr.toString().c_str());
  freeifaddrs(list);
  *out = addr;
  return tcclSuccess;
}

// ---- host identity --------------------------------------------------------------------------

namespace {
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
}  // namespace

const char* getHostName() {
  static char name[256] = "unknown";
  static std::once_flag once;
  std::call_once(once, [] {
    char buf[256] = "";
    if (gethostname(buf, sizeof(buf) - 1) == 0 && buf[0] != '\0') {
      buf[strcspn(buf, ".")] = '\0';  // no domain, as NCCL prints it
      snprintf(name, sizeof(name), "%s", buf);
    }
  });
  return name;
}

uint64_t getHostHash() {
  std::string id = getEnvString("TCCL_HOSTID");
  if (id.empty()) {
    // The boot id tells apart containers that share a host name but not a kernel.
    std::string bootId;
    std::ifstream f("/proc/sys/kernel/random/boot_id");
    std::getline(f, bootId);
    id = std::string(getHostName()) + bootId;
  }
  return fnv1a(id);
}

uint64_t randomU64() {
  uint64_t value = 0;
  char* p = reinterpret_cast<char*>(&value);
  size_t got = 0;
  while (got < sizeof(value)) {
    ssize_t n = getrandom(p + got, sizeof(value) - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {  // no getrandom (very old kernel): time and address entropy, better than 0
      value ^=
          static_cast<uint64_t>(Clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
      value ^= reinterpret_cast<uintptr_t>(&value);
      break;
    }
    got += static_cast<size_t>(n);
  }
  return value;
}

}  // namespace tccl
