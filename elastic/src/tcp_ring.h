// The transport of the TCP communicator (tcp_communicator.h): a ring of plain TCP connections.
// Each rank holds two: one it opened to the next rank, on which it only sends, and one the
// previous rank opened to it, on which it only receives (with two ranks these are two sockets
// between the same pair, one per direction). Every collective of the communicator is a sequence
// of exchange() calls: send a range to the next rank while receiving a range from the previous
// one, both progressed by one poll(2) loop on non-blocking sockets, so that neither side can
// block the other on a full socket buffer.
//
// Connecting: each rank listens on `hostname` (port chosen by the kernel) and publishes
// "<host> <port> <token>" under "tcp/rank_<r>" in the store; it then connects to the next rank
// and sends a hello (magic, its rank, the world size, the next rank's token), and accepts the
// previous rank's connection, dropping any connection whose hello does not carry this rank's
// token (the store is the rendezvous's authenticated one; a stranger on the port cannot join).
// The hellos of every pending connection are read side by side, so a stranger that connects and
// stays silent cannot hold up the previous rank's hello.
//
// cut() (any thread, any time) ends every wait at once: it shuts both connections down — so the
// neighbours' waits end too, as they would on a dead peer — and wakes this rank's poll through
// an eventfd. Sockets are closed only by the destructor, so a cut never races a descriptor's
// reuse. Nothing here blocks without a deadline.
// Thread-safety: connect() and exchange() on one thread at a time; cut() and was_cut() from any.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <mutex>
#include <string>

#include "tenax/core/unique_fd.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic::detail {

class TcpRing {
 public:
  using Clock = std::chrono::steady_clock;

  /// One step of a collective. `send_bytes` from `send` go to the next rank while `recv_bytes`
  /// from the previous rank land in `recv`. With `relay`, a byte is sent only once it has been
  /// received (send and recv name the same buffer: a broadcast passing data down the ring).
  /// `on_received(total)` runs after every read with the number of bytes received so far.
  /// A relay sends what it receives: send_bytes == recv_bytes.
  struct Transfer {
    const std::byte* send = nullptr;
    std::size_t send_bytes = 0;
    std::byte* recv = nullptr;
    std::size_t recv_bytes = 0;
    bool relay = false;
    std::function<void(std::size_t)> on_received;
  };

  TcpRing(int rank, int size);
  TcpRing(const TcpRing&) = delete;
  TcpRing& operator=(const TcpRing&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int next() const { return (rank_ + 1) % size_; }
  int prev() const { return (rank_ + size_ - 1) % size_; }

  /// Listens on `hostname`, publishes its address in `store`, connects to the next rank and
  /// accepts the previous one, all by `deadline`. Throws RendezvousError (cannot listen),
  /// TimeoutError (a neighbour did not arrive in time), PeerLostError (a neighbour went away,
  /// or cut() was called).
  void connect(Store& store, const std::string& hostname, Clock::time_point deadline);

  /// Runs one transfer to completion by `deadline`. Throws TimeoutError (naming the neighbour
  /// still owed bytes) or PeerLostError (a neighbour closed its connection, or cut()).
  void exchange(const Transfer& transfer, Clock::time_point deadline);

  /// Ends every wait now and makes every later call throw PeerLostError. Idempotent.
  void cut();
  bool was_cut() const { return cut_.load(); }

 private:
  /// Waits for one of `fd`'s `events` (or the cut) until `deadline`; false on timeout.
  bool wait_for(int fd, short events, Clock::time_point deadline);
  void wait_for_key(Store& store, const std::string& key, Clock::time_point deadline);
  void connect_to_next(Store& store, Clock::time_point deadline);
  void accept_from_prev(Clock::time_point deadline);
  [[noreturn]] void throw_cut(const std::string& during) const;

  int rank_;
  int size_;
  std::uint64_t token_;  // what the previous rank must present
  UniqueFd wake_;        // eventfd: cut() makes it readable
  UniqueFd listener_;
  UniqueFd to_next_;
  UniqueFd from_prev_;
  std::mutex mutex_;  // guards the descriptors' assignment (connect) against cut()
  std::atomic<bool> cut_{false};
};

}  // namespace tenax::elastic::detail
