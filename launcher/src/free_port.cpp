#include "free_port.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"

namespace tenax::launcher {
namespace {

// Binds a fresh socket of `family` to the wildcard address, port 0; returns the port the kernel
// chose, or 0 with `error` set.
int bind_any(int family, std::string& error) {
  const UniqueFd fd(::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd) {
    error = std::string("socket: ") + std::strerror(errno);
    return 0;
  }
  sockaddr_storage address{};
  socklen_t length = 0;
  if (family == AF_INET6) {
    // Dual-stack, as PyTorch's TCPStore binds: the port must be free for IPv4 and IPv6 alike.
    const int off = 0;
    (void)::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&address);
    a6->sin6_family = AF_INET6;
    a6->sin6_addr = in6addr_any;
    length = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&address);
    a4->sin_family = AF_INET;
    a4->sin_addr.s_addr = htonl(INADDR_ANY);
    length = sizeof(sockaddr_in);
  }
  int port = 0;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&address), length) != 0) {
    error = std::string("bind: ") + std::strerror(errno);
  } else if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    error = std::string("getsockname: ") + std::strerror(errno);
  } else {
    port = ntohs(family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                    : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  }
  return port;
}

}  // namespace

int pick_free_port() {
  std::string error6;
  std::string error4;
  if (const int port = bind_any(AF_INET6, error6); port != 0) return port;
  if (const int port = bind_any(AF_INET, error4); port != 0) return port;
  throw Error("cannot find a free TCP port for MASTER_PORT (IPv6: " + error6 + "; IPv4: " + error4 +
              "); check that this host allows binding TCP sockets");
}

}  // namespace tenax::launcher
