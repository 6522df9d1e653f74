#include "tcp_ring.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::elastic::detail {
namespace {

using Clock = TcpRing::Clock;

constexpr std::uint64_t kMagic = 0x5054434b58414e54ULL;  // "TNAXKCTP": a Tenax ring hello
constexpr int kBacklog = 16;
constexpr std::size_t kMaxPendingHellos = 64;  // connections read at once while waiting for a hello

// The hello a rank sends on the connection it opened to the next rank.
struct Hello {
  std::uint64_t magic;
  std::uint32_t rank;
  std::uint32_t size;
  std::uint64_t token;
};

std::string key_of(int rank) { return "tcp/rank_" + std::to_string(rank); }

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  return std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()), std::chrono::milliseconds(0));
}

std::string errno_text(int error) { return std::strerror(error); }

void set_socket_options(int fd) {
  const int one = 1;
  // Latency of the small collectives (barrier, the flag allreduce) matters more than batching.
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// addrinfo for host:port (numeric port), any family; throws RendezvousError naming the host.
struct AddrInfo {
  addrinfo* list = nullptr;
  AddrInfo(const std::string& host, const std::string& port, bool passive) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = passive ? AI_PASSIVE : 0;
    if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &list); rc != 0) {
      throw RendezvousError(
          fmt::format("TCP communicator: cannot resolve '{}': {}; check the host's address", host, ::gai_strerror(rc)));
    }
  }
  ~AddrInfo() {
    if (list != nullptr) ::freeaddrinfo(list);
  }
  AddrInfo(const AddrInfo&) = delete;
  AddrInfo& operator=(const AddrInfo&) = delete;
};

std::uint64_t random_token() {
  std::random_device device;
  return (static_cast<std::uint64_t>(device()) << 32) ^ device();
}

}  // namespace

TcpRing::TcpRing(int rank, int size) : rank_(rank), size_(size), token_(random_token()) {
  wake_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_) throw Error("TCP communicator: eventfd failed: " + errno_text(errno));
}

void TcpRing::throw_cut(const std::string& during) const {
  throw PeerLostError(fmt::format("the TCP ring of rank {} of {} was cut {}", rank_, size_, during));
}

void TcpRing::cut() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cut_.exchange(true)) return;
  for (const UniqueFd* fd : {&to_next_, &from_prev_, &listener_}) {
    if (*fd) ::shutdown(fd->get(), SHUT_RDWR);
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(wake_.get(), &one, sizeof one);
}

bool TcpRing::wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    if (was_cut()) return true;  // the caller checks the cut
    pollfd fds[2] = {{fd, events, 0}, {wake_.get(), POLLIN, 0}};
    const auto left = left_until(deadline);
    const int ready = ::poll(fds, 2, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw Error("TCP communicator: poll failed: " + errno_text(errno));
    if (ready > 0) return true;
    if (left.count() == 0) return false;
  }
}

void TcpRing::wait_for_key(Store& store, const std::string& key, Clock::time_point deadline) {
  // In slices, so that a cut during the wait for a peer that will never publish is noticed.
  for (;;) {
    if (was_cut()) throw_cut("while it waited for " + key);
    const auto left = left_until(deadline);
    try {
      store.wait({key}, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(100)));
      return;
    } catch (const TimeoutError&) {
      if (left.count() <= 100) {
        throw TimeoutError(fmt::format("rank {} of {}: rank {} did not publish its TCP address", rank_, size_,
                                       key == key_of(next()) ? next() : prev()));
      }
    }
  }
}

void TcpRing::connect(Store& store, const std::string& hostname, Clock::time_point deadline) {
  // Listen first: the address is published only once a connection to it can succeed.
  {
    AddrInfo local(hostname, "0", true);
    std::string last_error = "no address";
    UniqueFd listener;
    for (addrinfo* a = local.list; a != nullptr; a = a->ai_next) {
      UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!fd) {
        last_error = errno_text(errno);
        continue;
      }
      if (::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), kBacklog) != 0) {
        last_error = errno_text(errno);
        continue;
      }
      listener = std::move(fd);
      break;
    }
    if (!listener) {
      throw RendezvousError(
          fmt::format("TCP communicator: rank {} of {} cannot listen on '{}': {}; check the "
                      "host's address",
                      rank_, size_, hostname, last_error));
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (cut_) throw_cut("before it listened");
    listener_ = std::move(listener);
  }
  sockaddr_storage bound{};
  socklen_t length = sizeof bound;
  ::getsockname(listener_.get(), reinterpret_cast<sockaddr*>(&bound), &length);
  const int port = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<const sockaddr_in6&>(bound).sin6_port
                                                     : reinterpret_cast<const sockaddr_in&>(bound).sin_port);
  const std::string published = fmt::format("{} {} {}", hostname, port, token_);
  store.set(key_of(rank_), std::vector<char>(published.begin(), published.end()));

  connect_to_next(store, deadline);
  accept_from_prev(deadline);
  // No more peers come: the port closes.
  std::lock_guard<std::mutex> lock(mutex_);
  if (cut_) throw_cut("while it connected");
  listener_.reset();
}

void TcpRing::connect_to_next(Store& store, Clock::time_point deadline) {
  const int peer = next();
  wait_for_key(store, key_of(peer), deadline);
  const std::vector<char> value = store.get(key_of(peer), std::max(left_until(deadline), std::chrono::milliseconds(1)));
  std::istringstream fields(std::string(value.begin(), value.end()));
  std::string host;
  int port = 0;
  std::uint64_t token = 0;
  if (!(fields >> host >> port >> token) || port <= 0 || port > 65535) {
    throw RendezvousError(fmt::format("TCP communicator: rank {} published '{}' under {}, not '<host> <port> <token>'",
                                      peer, std::string(value.begin(), value.end()), key_of(peer)));
  }
  const Hello hello{kMagic, static_cast<std::uint32_t>(rank_), static_cast<std::uint32_t>(size_), token};
  std::string last_error;
  // A refused connection is retried until the deadline: the peer listens before it publishes,
  // but a transient refusal (a full backlog) must not end the generation.
  for (;;) {
    if (was_cut()) throw_cut("while it connected to rank " + std::to_string(peer));
    AddrInfo remote(host, std::to_string(port), false);
    for (addrinfo* a = remote.list; a != nullptr; a = a->ai_next) {
      UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
      if (!fd) {
        last_error = errno_text(errno);
        continue;
      }
      if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
        last_error = errno_text(errno);
        continue;
      }
      if (!wait_for(fd.get(), POLLOUT, deadline)) break;
      if (was_cut()) throw_cut("while it connected to rank " + std::to_string(peer));
      int error = 0;
      socklen_t error_length = sizeof error;
      ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &error, &error_length);
      if (error != 0) {
        last_error = errno_text(error);
        continue;
      }
      set_socket_options(fd.get());
      // 24 bytes into an empty socket buffer: written whole or the connection is gone.
      if (::send(fd.get(), &hello, sizeof hello, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof hello)) {
        last_error = errno_text(errno);
        continue;
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (cut_) throw_cut("while it connected to rank " + std::to_string(peer));
      to_next_ = std::move(fd);
      return;
    }
    if (Clock::now() >= deadline) {
      throw TimeoutError(fmt::format("rank {} of {} could not connect to rank {} at {}:{} ({})", rank_, size_, peer,
                                     host, port, last_error.empty() ? "timed out" : last_error));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void TcpRing::accept_from_prev(Clock::time_point deadline) {
  // Every connection that has not yet sent its whole hello is read beside the others and the
  // listener, so that a stranger that connects and goes quiet (a port scanner, a stale
  // generation's half-open connection) cannot hold up the previous rank until the deadline.
  struct Pending {
    UniqueFd fd;
    Hello hello{};
    std::size_t got = 0;
  };
  const int peer = prev();
  std::vector<Pending> pending;
  int dropped = 0;
  const auto drop = [&](std::size_t i) {
    pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    ++dropped;
  };
  for (;;) {
    if (was_cut()) throw_cut("while it waited for rank " + std::to_string(peer));
    std::vector<pollfd> fds;
    fds.reserve(pending.size() + 2);
    fds.push_back({wake_.get(), POLLIN, 0});
    fds.push_back({listener_.get(), POLLIN, 0});
    for (const Pending& p : pending) fds.push_back({p.fd.get(), POLLIN, 0});
    const auto left = left_until(deadline);
    const int ready = ::poll(fds.data(), fds.size(), static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) throw Error("TCP communicator: poll failed: " + errno_text(errno));
    if (ready == 0) {
      if (left.count() > 0) continue;
      throw TimeoutError(fmt::format("rank {} of {}: rank {} did not connect{}", rank_, size_, peer,
                                     dropped + static_cast<int>(pending.size()) == 0
                                         ? ""
                                         : fmt::format(" ({} other connection(s) to this rank's port sent no valid "
                                                       "hello and were ignored)",
                                                       dropped + static_cast<int>(pending.size()))));
    }
    // Hellos first, in reverse so that dropping one leaves the indices still to visit valid.
    for (std::size_t i = pending.size(); i-- > 0;) {
      if (fds[i + 2].revents == 0) continue;
      Pending& p = pending[i];
      const ssize_t n = ::recv(p.fd.get(), reinterpret_cast<char*>(&p.hello) + p.got, sizeof p.hello - p.got, 0);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
      if (n <= 0) {
        drop(i);
        continue;
      }
      p.got += static_cast<std::size_t>(n);
      if (p.got < sizeof p.hello) continue;
      const Hello& hello = p.hello;
      if (hello.magic != kMagic || hello.token != token_ || hello.rank != static_cast<std::uint32_t>(peer) ||
          hello.size != static_cast<std::uint32_t>(size_)) {
        // Not the previous rank of this ring: a stale generation's rank or a stranger on the port.
        logger("tenax.elastic")
            ->debug("TCP ring rank {} of {}: dropped a connection that is not rank {}'s", rank_, size_, peer);
        drop(i);
        continue;
      }
      set_socket_options(p.fd.get());
      std::lock_guard<std::mutex> lock(mutex_);
      if (cut_) throw_cut("while it waited for rank " + std::to_string(peer));
      from_prev_ = std::move(p.fd);
      return;
    }
    if (fds[1].revents == 0) continue;
    for (;;) {
      UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!fd) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR || errno == ECONNABORTED) break;
        throw PeerLostError(fmt::format("rank {} of {}: accept failed: {}", rank_, size_, errno_text(errno)));
      }
      // Bounded: a flood of idle connections costs the oldest its place, never a descriptor each.
      if (pending.size() >= kMaxPendingHellos) drop(0);
      pending.push_back(Pending{std::move(fd)});
    }
  }
}

void TcpRing::exchange(const Transfer& t, Clock::time_point deadline) {
  if (t.relay && t.send_bytes != t.recv_bytes) throw Error("TcpRing::exchange: a relay sends what it receives");
  std::size_t sent = 0;
  std::size_t received = 0;
  for (;;) {
    if (was_cut()) throw_cut("during a collective");
    const std::size_t sendable = t.relay ? received : t.send_bytes;
    const bool sending = sent < sendable;
    const bool receiving = received < t.recv_bytes;
    if (!sending && !receiving) return;
    pollfd fds[3];
    nfds_t count = 0;
    int send_index = -1;
    int recv_index = -1;
    if (sending) {
      send_index = static_cast<int>(count);
      fds[count++] = {to_next_.get(), POLLOUT, 0};
    }
    if (receiving) {
      recv_index = static_cast<int>(count);
      fds[count++] = {from_prev_.get(), POLLIN, 0};
    }
    fds[count++] = {wake_.get(), POLLIN, 0};
    const auto left = left_until(deadline);
    const int ready = ::poll(fds, count, static_cast<int>(std::min<std::int64_t>(left.count(), 60'000)));
    if (ready < 0) {
      if (errno == EINTR) continue;
      throw Error("TCP communicator: poll failed: " + errno_text(errno));
    }
    if (ready == 0) {
      if (left.count() > 0) continue;
      const bool owed_by_prev = received < t.recv_bytes;
      throw TimeoutError(fmt::format("rank {} of {} waited for rank {} ({} of {} bytes {})", rank_, size_,
                                     owed_by_prev ? prev() : next(), owed_by_prev ? received : sent,
                                     owed_by_prev ? t.recv_bytes : t.send_bytes, owed_by_prev ? "received" : "sent"));
    }
    if (recv_index >= 0 && fds[recv_index].revents != 0) {
      const ssize_t n = ::recv(from_prev_.get(), t.recv + received, t.recv_bytes - received, 0);
      if (n > 0) {
        received += static_cast<std::size_t>(n);
        if (t.on_received) t.on_received(received);
      } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        if (was_cut()) throw_cut("during a collective");
        throw PeerLostError(fmt::format("rank {} of {}: rank {} closed its connection ({})", rank_, size_, prev(),
                                        n == 0 ? "end of stream" : errno_text(errno)));
      }
    }
    if (send_index >= 0 && fds[send_index].revents != 0) {
      const std::size_t limit = t.relay ? received : t.send_bytes;
      const ssize_t n = ::send(to_next_.get(), t.send + sent, limit - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        if (was_cut()) throw_cut("during a collective");
        throw PeerLostError(
            fmt::format("rank {} of {}: rank {} closed its connection ({})", rank_, size_, next(), errno_text(errno)));
      }
    }
  }
}

}  // namespace tenax::elastic::detail
