#include "gloo_mesh.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_set>

#include <gloo/common/error.h>
#include <gloo/transport/context.h>
#include <gloo/transport/tcp/address.h>

#include <fmt/format.h>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::elastic::detail {
namespace {

using Clock = std::chrono::steady_clock;

std::string key_of(int rank) { return "rank_" + std::to_string(rank); }

// A socket's local address as comparable bytes (family, port, address); empty when it has none.
std::string endpoint_bytes(const sockaddr_storage& address) {
  std::string out(reinterpret_cast<const char*>(&address.ss_family), sizeof address.ss_family);
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    out.append(reinterpret_cast<const char*>(&in.sin_port), sizeof in.sin_port);
    out.append(reinterpret_cast<const char*>(&in.sin_addr), sizeof in.sin_addr);
    return out;
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    out.append(reinterpret_cast<const char*>(&in6.sin6_port), sizeof in6.sin6_port);
    out.append(reinterpret_cast<const char*>(&in6.sin6_addr), sizeof in6.sin6_addr);
    return out;
  }
  return {};
}

std::string socket_endpoint(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) return {};
  return endpoint_bytes(address);
}

// This process's sockets by local address: how a connected pair's descriptor is found (Gloo
// keeps it private). One pass over /proc/self/fd for the whole mesh. Other threads open and
// close descriptors meanwhile (tests/tsan.supp says why that is safe here); kept out of line
// so that the suppression can name it.
[[gnu::noinline]] std::map<std::string, int> sockets_by_endpoint() {
  std::map<std::string, int> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISSOCK(info.st_mode)) continue;
    if (std::string endpoint = socket_endpoint(fd); !endpoint.empty()) out.emplace(std::move(endpoint), fd);
  }
  return out;
}

}  // namespace

// The mesh's transport context as Gloo's collectives see it: the TCP context's pairs, and its
// buffers wrapped so that a cut fails their waits. Gloo's Pair::signalException (the socket
// ended) fails the buffers still waiting for their peer's notice, but neither a send already
// queued on the socket nor a receive whose message had begun to arrive: a thread waiting on one
// of those waited out the collective's whole timeout after its peer was gone, while the next
// generation waited for this rank (IntegrationMultiNode.APausedAgentUnderInProcessRecovery...
// under load: rank 0's bucket allreduce sat in Gloo's waitRecv for its 120 s).
class CuttableContext final : public gloo::transport::Context {
 public:
  explicit CuttableContext(std::shared_ptr<gloo::transport::Context> pairs)
      : gloo::transport::Context(pairs->rank, pairs->size), pairs_(std::move(pairs)) {}

  std::unique_ptr<gloo::transport::Pair>& getPair(int peer) override { return pairs_->getPair(peer); }
  std::unique_ptr<gloo::transport::Pair>& createPair(int peer) override { return pairs_->createPair(peer); }
  std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(void* ptr, size_t size) override {
    auto buffer = std::make_unique<Buffer>(*this, pairs_->createUnboundBuffer(ptr, size));
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    live_.insert(buffer.get());
    return buffer;
  }

  /// Every wait on a live buffer ends now, and every later call on any buffer throws. Idempotent.
  void cut(const std::string& why) {
    std::lock_guard<std::mutex> lock(buffers_mutex_);
    if (!why_.empty()) return;
    why_ = "the communicator was cut: " + why;
    for (Buffer* buffer : live_) buffer->abort_waits();
  }

 private:
  // Gloo's buffer, forwarded to; its waits and calls throw once the context is cut. An aborted
  // wait returns false in Gloo (the abort is kept until a wait takes it, so one that starts
  // after the cut returns at once too); here that becomes the IoException a collective fails with.
  class Buffer final : public gloo::transport::UnboundBuffer {
   public:
    Buffer(CuttableContext& owner, std::unique_ptr<gloo::transport::UnboundBuffer> inner)
        : gloo::transport::UnboundBuffer(inner->ptr, inner->size), owner_(owner), inner_(std::move(inner)) {}
    ~Buffer() override {
      std::lock_guard<std::mutex> lock(owner_.buffers_mutex_);
      owner_.live_.erase(this);
    }
    bool waitRecv(int* rank, std::chrono::milliseconds timeout) override {
      throw_if_cut();
      const bool done = inner_->waitRecv(rank, timeout);
      if (!done) throw_if_cut();
      return done;
    }
    bool waitSend(int* rank, std::chrono::milliseconds timeout) override {
      throw_if_cut();
      const bool done = inner_->waitSend(rank, timeout);
      if (!done) throw_if_cut();
      return done;
    }
    void abortWaitRecv() override { inner_->abortWaitRecv(); }
    void abortWaitSend() override { inner_->abortWaitSend(); }
    void send(int peer, uint64_t slot, size_t offset, size_t bytes) override {
      throw_if_cut();
      inner_->send(peer, slot, offset, bytes);
    }
    void recv(int peer, uint64_t slot, size_t offset, size_t bytes) override {
      throw_if_cut();
      inner_->recv(peer, slot, offset, bytes);
    }
    void recv(std::vector<int> peers, uint64_t slot, size_t offset, size_t bytes) override {
      throw_if_cut();
      inner_->recv(std::move(peers), slot, offset, bytes);
    }
    void abort_waits() {
      inner_->abortWaitRecv();
      inner_->abortWaitSend();
    }

   private:
    void throw_if_cut() {
      std::string why;
      {
        std::lock_guard<std::mutex> lock(owner_.buffers_mutex_);
        why = owner_.why_;
      }
      if (!why.empty()) throw gloo::IoException(why);
    }

    CuttableContext& owner_;
    std::unique_ptr<gloo::transport::UnboundBuffer> inner_;
  };

  std::shared_ptr<gloo::transport::Context> pairs_;
  std::mutex buffers_mutex_;  // guards live_ and why_; taken before a Gloo buffer's own lock
  std::unordered_set<Buffer*> live_;
  std::string why_;  // non-empty once cut
};

bool GlooMesh::was_cut() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return cut_;
}

void GlooMesh::wait_for_key(Store& store, const std::string& key, Clock::time_point deadline) {
  // In slices, so that a cut during the wait for a peer that will never publish is noticed.
  for (;;) {
    if (was_cut()) throw PeerLostError("the mesh was cut while it waited for " + key);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      store.wait({key}, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(100)));
      return;
    } catch (const TimeoutError&) {
      if (left.count() <= 100) throw;
    }
  }
}

void GlooMesh::connect(Store& store, const std::shared_ptr<gloo::transport::Device>& device,
                       Clock::time_point deadline) {
  const auto timeout =
      std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()), std::chrono::milliseconds(1));
  std::shared_ptr<gloo::transport::Context> pairs = device->createContext(rank, size);
  pairs->setTimeout(timeout);
  std::vector<char> addresses;
  std::size_t address_size = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cut_) throw PeerLostError("the mesh was cut before it connected");
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const std::vector<char> bytes = pairs->createPair(peer)->address().bytes();
      address_size = bytes.size();
      addresses.insert(addresses.end(), bytes.begin(), bytes.end());
    }
    pairs_ = pairs;
  }
  store.set(key_of(rank), addresses);
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    wait_for_key(store, key_of(peer), deadline);
    const auto left =
        std::max(std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()), std::chrono::milliseconds(1));
    const std::vector<char> theirs = store.get(key_of(peer), left);
    // The peer listed one address per other rank, in rank order: ours is at our index among them.
    const std::size_t index = static_cast<std::size_t>(rank < peer ? rank : rank - 1);
    if (address_size == 0 || theirs.size() != address_size * static_cast<std::size_t>(size - 1)) {
      throw RendezvousError(fmt::format("Gloo mesh: rank {} published {} bytes of addresses under {}, expected {}",
                                        peer, theirs.size(), key_of(peer),
                                        address_size * static_cast<std::size_t>(size - 1)));
    }
    const auto first = theirs.begin() + static_cast<std::ptrdiff_t>(index * address_size);
    if (was_cut()) throw PeerLostError("the mesh was cut while it connected");
    pairs->getPair(peer)->connect(std::vector<char>(first, first + static_cast<std::ptrdiff_t>(address_size)));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  // A cut during the last connect closed pairs that then looked connected to Gloo.
  if (cut_) throw PeerLostError("the mesh was cut while it connected");
  hold_sockets(*pairs);
  device_ = device;
  cuttable_ = std::make_shared<CuttableContext>(std::move(pairs));
  cuttable_->setTimeout(timeout);
  transportContext_ = cuttable_;
  pairs_.reset();
}

void GlooMesh::hold_sockets(gloo::transport::Context& pairs) {
  const std::map<std::string, int> sockets = sockets_by_endpoint();
  for (int peer = 0; peer < size; ++peer) {
    if (peer == rank) continue;
    const auto* address = dynamic_cast<const gloo::transport::tcp::Address*>(&pairs.getPair(peer)->address());
    if (address == nullptr) continue;
    const std::string endpoint = endpoint_bytes(address->getSockaddr());
    const auto it = sockets.find(endpoint);
    if (it == sockets.end()) continue;
    UniqueFd copy(::fcntl(it->second, F_DUPFD_CLOEXEC, 0));
    // The number may have been reused between the scan and the dup: the copy must be that socket.
    if (copy && socket_endpoint(copy.get()) == endpoint) sockets_.push_back(std::move(copy));
  }
  if (sockets_.size() != static_cast<std::size_t>(size - 1)) {
    logger("tenax.elastic")
        ->debug("Gloo mesh of rank {}: found {} of {} connected sockets; a cut waits for the others' timeouts", rank,
                sockets_.size(), size - 1);
  }
}

void GlooMesh::cut() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (cut_) return;
  cut_ = true;
  for (const UniqueFd& socket : sockets_) ::shutdown(socket.get(), SHUT_RDWR);
  if (cuttable_ && !pairs_) cuttable_->cut("a peer was lost or the generation was superseded");
  if (pairs_) {
    // Still connecting: Pair::close wakes a wait for a connection, under the pair's own lock.
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      try {
        if (auto& pair = pairs_->getPair(peer)) pair->close();
      } catch (const std::exception&) {
        // a pair that was never created
      }
    }
  }
}

}  // namespace tenax::elastic::detail
