// RendezvousClient: the API side (any thread) and the client's own thread, which owns the
// DEALER socket, meet in Shared under one mutex. The API wakes the thread through an eventfd
// that the thread polls beside the socket, so a request goes out at once rather than at the
// next heartbeat. Requests that need the service's word (RESUME_STEP, RESTART, LEAVE) are
// resent every heartbeat until answered; the service handles each idempotently.
#include "tenax/core/endpoint.h"
#include "tenax/elastic/rendezvous_client.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <iterator>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <sys/eventfd.h>
#include <unistd.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "peer_guard.h"
#include "rendezvous_protocol.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace detail;

enum class Phase {
  kIdle,      // not joining, not in a generation
  kJoining,   // JOIN sent every interval until ASSIGN or FAILED
  kAssigned,  // in a generation: HEARTBEAT every interval
  kEnded,     // the generation ended (re-rendezvous); still heartbeating until join()
  kFailed,    // the service failed the round
  kLost,      // the service stayed silent for service_timeout
};

bool heartbeating(Phase p) { return p == Phase::kJoining || p == Phase::kAssigned || p == Phase::kEnded; }

long long ms(Clock::duration d) { return std::chrono::duration_cast<milliseconds>(d).count(); }

// The service reports the store as bound ("tcp://0.0.0.0:PORT" for a wildcard bind); a node
// reaches it at the host it reaches the rendezvous at.
std::string reachable_store_endpoint(const std::string& store, const std::string& rendezvous) {
  try {
    const Endpoint bound = Endpoint::parse(store, /*allow_any_port=*/true);
    if (!bound.wildcard()) return store;
    return bound.with_host(Endpoint::parse(rendezvous, /*allow_any_port=*/true).host).str();
  } catch (const ConfigError&) {
    return store;  // not TCP: as it is
  }
}

// Everything the API threads and the client thread share; guarded by `mutex`.
struct Shared {
  std::mutex mutex;
  std::condition_variable changed;
  Phase phase = Phase::kIdle;
  std::string message;  // why the phase is what it is (ended, failed, lost)
  std::optional<Assignment> assignment;
  std::uint64_t join_epoch = 0;  // bumped by join(): the thread (re)starts joining
  std::int64_t master_port = 0;  // offered in the JOINs of the current join()
  std::optional<WaitMsg> last_wait;
  Clock::time_point last_heard{};
  std::int64_t resume_step = 0;
  std::uint64_t resume_requested = 0;
  std::uint64_t resume_acked = 0;
  std::string restart_reason;
  std::uint64_t restart_requested = 0;
  std::uint64_t leave_requested = 0;
  std::uint64_t leave_acked = 0;
  std::int64_t finish_generation = -1;
  std::uint64_t finish_requested = 0;
  std::uint64_t finish_acked = 0;
  bool stop = false;
};

// Unique per process and per socket: the ROUTER needs distinct identities, and a reconnected
// socket must not inherit its predecessor's.
std::string make_routing_id(const std::string& node_id) {
  static std::atomic<unsigned> sockets{0};
  return "rdzv/" + node_id + "/" + std::to_string(::getpid()) + "/" + std::to_string(sockets++);
}

// The client's DEALER, connected (connecting never waits for the peer). Throws zmq::error_t
// for an endpoint ZeroMQ cannot parse.
zmq::socket_t connect_dealer(zmq::context_t& context, const std::string& endpoint,
                             const RendezvousClientOptions& options) {
  zmq::socket_t socket(context, zmq::socket_type::dealer);
  socket.set(zmq::sockopt::linger, 0);
  // Not ZMQ_IMMEDIATE: a message sent before the connection is up waits for it instead of
  // being dropped. What queues while the service is away is bounded (one message per
  // interval, up to the high-water mark) and discarded with the socket on reconnection.
  socket.set(zmq::sockopt::reconnect_ivl, 100);
  socket.set(zmq::sockopt::reconnect_ivl_max, 1000);
  socket.set(zmq::sockopt::routing_id, make_routing_id(options.node_id()));
  if (options.keys()) detail::make_curve_client(socket, *options.keys());
  socket.connect(endpoint);
  return socket;
}

class ClientThread {
 public:
  /// `first_socket`: already connected by the constructor (which so checked the endpoint).
  ClientThread(zmq::context_t& context, std::string endpoint, const RendezvousClientOptions& options, Shared& shared,
               int wake_fd, zmq::socket_t first_socket)
      : context_(context),
        endpoint_(std::move(endpoint)),
        options_(options),
        shared_(shared),
        wake_fd_(wake_fd),
        log_(logger("tenax.elastic")),
        last_generation_(options.last_generation()) {
    socket_.emplace(std::move(first_socket));
  }

  void run() {
    try {
      loop();
    } catch (const std::exception& e) {
      log_->error("rendezvous client of node '{}' stopped on an internal error: {}", options_.node_id(), e.what());
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.phase = Phase::kLost;
      shared_.message = std::string("the rendezvous client stopped on an internal error: ") + e.what();
      shared_.changed.notify_all();
    }
    close_socket();
  }

 private:
  void loop() {
    const milliseconds interval = options_.heartbeat().interval();
    Clock::time_point next_beat = Clock::now();
    // The socket the constructor connected: connecting early sends nothing, and the first JOIN
    // then finds a connection.
    if (!socket_) open_socket();
    while (true) {
      poll(std::clamp(std::chrono::ceil<milliseconds>(next_beat - Clock::now()), milliseconds(0), interval));
      drain_wake();
      if (socket_) receive_all();

      std::unique_lock<std::mutex> lock(shared_.mutex);
      if (shared_.stop) return;
      const auto now = Clock::now();
      forgive_own_pause(now);
      bool beat = now >= next_beat;
      if (shared_.join_epoch != join_epoch_) {  // join() was called: JOIN at once
        join_epoch_ = shared_.join_epoch;
        shared_.last_heard = now;
        reconnects_ = 0;
        backoff_ = interval;
        beat = true;
      }
      // A new request goes out at once; unanswered ones again with every beat.
      const bool new_request = shared_.resume_requested != resume_sent_ || shared_.restart_requested != restart_sent_ ||
                               shared_.leave_requested != leave_sent_ || shared_.finish_requested != finish_sent_;
      if (beat || new_request) send_due(lock, beat);
      if (beat) next_beat = now + interval;
      check_liveness(now);
    }
  }

  void poll(milliseconds timeout) {
    std::vector<zmq::pollitem_t> items{{nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    if (socket_) items.push_back({socket_->handle(), 0, ZMQ_POLLIN, 0});
    try {
      zmq::poll(items.data(), items.size(), timeout);
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) throw;
    }
  }

  void drain_wake() {
    std::uint64_t count = 0;
    while (::read(wake_fd_, &count, sizeof count) == static_cast<ssize_t>(sizeof count)) {
    }
  }

  // Sends what the phase and the pending requests call for. `lock` holds shared_.mutex.
  void send_due(std::unique_lock<std::mutex>& lock, bool beat) {
    (void)lock;
    const Phase phase = shared_.phase;
    const std::string& node = options_.node_id();
    if (beat && phase == Phase::kJoining) {
      send(JoinMsg{node, options_.host(), options_.local_workers(), last_generation_, shared_.master_port});
    } else if (beat && (phase == Phase::kAssigned || phase == Phase::kEnded) && shared_.assignment) {
      send(HeartbeatMsg{node, shared_.assignment->generation});
    }
    if (shared_.resume_acked != shared_.resume_requested && (beat || shared_.resume_requested != resume_sent_)) {
      resume_sent_ = shared_.resume_requested;
      send(ResumeStepMsg{node, shared_.resume_step});
    }
    if (shared_.restart_requested != restart_sent_ || (beat && restart_pending_)) {
      restart_sent_ = shared_.restart_requested;
      restart_pending_ = phase == Phase::kAssigned && shared_.assignment;
      if (restart_pending_) send(RestartMsg{node, shared_.assignment->generation, shared_.restart_reason});
    }
    if (shared_.leave_acked != shared_.leave_requested && (beat || shared_.leave_requested != leave_sent_)) {
      leave_sent_ = shared_.leave_requested;
      send(LeaveMsg{node});
    }
    if (shared_.finish_acked != shared_.finish_requested && (beat || shared_.finish_requested != finish_sent_)) {
      finish_sent_ = shared_.finish_requested;
      send(FinishedMsg{node, shared_.finish_generation});
    }
  }

  // This thread wakes at least once an interval. A longer gap means the agent itself did not
  // run (SIGSTOP, a debugger, a node thrashing under memory pressure): the service's answers
  // may be waiting unread in the socket, so the gap is not the service's silence. Without this,
  // an agent paused for longer than the service timeout declared the service lost the moment it
  // woke, before reading a single message. Holds shared_.mutex.
  void forgive_own_pause(Clock::time_point now) {
    const auto gap = now - last_iteration_;
    const bool first = last_iteration_ == Clock::time_point{};
    last_iteration_ = now;
    if (first || gap <= options_.heartbeat().expiry() / 2) return;
    log_->warn(
        "the rendezvous client of node '{}' did not run for {} ms (was this agent paused?); that gap is not "
        "counted as the service's silence",
        options_.node_id(), ms(gap));
    shared_.last_heard += gap;
    if (next_reconnect_ != Clock::time_point{}) next_reconnect_ = now;
  }

  // Reconnects after interval × liveness of silence (backing off), gives up after
  // service_timeout. Holds shared_.mutex.
  void check_liveness(Clock::time_point now) {
    if (!heartbeating(shared_.phase)) return;
    const auto silence = now - shared_.last_heard;
    if (silence > options_.service_timeout()) {
      shared_.phase = Phase::kLost;
      shared_.message = "the rendezvous service at " + endpoint_ + " has not answered node '" + options_.node_id() +
                        "' for " + std::to_string(ms(silence)) + " ms (service timeout " +
                        std::to_string(options_.service_timeout().count()) + " ms, " + std::to_string(reconnects_) +
                        " reconnection(s)); is the agent hosting it alive?";
      log_->error("{}", shared_.message);
      shared_.changed.notify_all();
      return;
    }
    if (silence <= options_.heartbeat().expiry() || now < next_reconnect_) return;
    // A node that leaves does not look for the service again: its farewell waits a bounded
    // time (RendezvousClient::leave), and a silent service may be gone for good (its host gave
    // up first); the service sees this node go when its heartbeats stop.
    if (shared_.leave_requested != 0) return;
    ++reconnects_;
    log_->warn("no answer from the rendezvous service at {} for {} ms; reconnecting (attempt {}, next in {} ms)",
               endpoint_, ms(silence), reconnects_, backoff_.count());
    close_socket();
    next_reconnect_ = now + backoff_;
    backoff_ = std::min(backoff_ * 2, options_.reconnect_backoff_max());
    // The new socket carries the current message at once.
    if (shared_.phase == Phase::kJoining) {
      send(JoinMsg{options_.node_id(), options_.host(), options_.local_workers(), last_generation_,
                   shared_.master_port});
    } else if (shared_.assignment) {
      send(HeartbeatMsg{options_.node_id(), shared_.assignment->generation});
    }
  }

  void receive_all() {
    while (socket_) {
      std::vector<zmq::message_t> raw;
      if (!zmq::recv_multipart(*socket_, std::back_inserter(raw), zmq::recv_flags::dontwait)) return;
      Frames frames;
      for (auto& m : raw) frames.push_back(m.to_string());
      std::string why;
      const auto message = decode_service_message(frames, why);
      if (!message) {
        log_->warn("ignored a malformed message from the rendezvous service at {}: {}", endpoint_, why);
        continue;
      }
      std::lock_guard<std::mutex> lock(shared_.mutex);
      shared_.last_heard = Clock::now();
      backoff_ = options_.heartbeat().interval();
      next_reconnect_ = {};
      std::visit([&](const auto& m) { on(m); }, *message);
    }
  }

  // on(): hold shared_.mutex.
  void on(const WaitMsg& m) {
    if (shared_.phase == Phase::kJoining) shared_.last_wait = m;
  }

  void on(const AssignMsg& m) {
    if (shared_.phase != Phase::kJoining) {
      log_->debug("ignored ASSIGN for generation {} (not joining)", m.assignment.generation);
      return;
    }
    Assignment a = m.assignment;
    a.store_endpoint = reachable_store_endpoint(a.store_endpoint, endpoint_);
    last_generation_ = a.generation;
    log_->info("node '{}' is node {} of {} in generation {}: ranks {}..{} of {}", options_.node_id(), a.node_rank,
               a.num_nodes, a.generation, a.rank_offset, a.rank_offset + a.local_world_size - 1, a.world_size);
    shared_.assignment = std::move(a);
    shared_.phase = Phase::kAssigned;
    shared_.message.clear();
    shared_.changed.notify_all();
  }

  void on(const PulseMsg& m) {
    if (shared_.phase != Phase::kAssigned || !shared_.assignment || shared_.assignment->generation != m.generation ||
        m.state == PulseState::kOk) {
      return;
    }
    shared_.phase = Phase::kEnded;
    shared_.message = "generation " + std::to_string(m.generation) + " ended: " + m.reason;
    restart_pending_ = false;
    log_->warn("node '{}': {}", options_.node_id(), shared_.message);
    shared_.changed.notify_all();
  }

  void on(const FailedMsg& m) {
    if (shared_.phase != Phase::kJoining) return;
    shared_.phase = Phase::kFailed;
    shared_.message = m.message;
    shared_.changed.notify_all();
  }

  void on(const AckMsg& m) {
    if (m.of == RdzvType::kResumeStep && m.value == shared_.resume_step) {
      shared_.resume_acked = shared_.resume_requested;
    } else if (m.of == RdzvType::kLeave && shared_.leave_acked != shared_.leave_requested) {
      shared_.leave_acked = shared_.leave_requested;
      shared_.phase = Phase::kIdle;
      shared_.assignment.reset();
    } else if (m.of == RdzvType::kFinished && m.value == shared_.finish_generation &&
               shared_.finish_acked != shared_.finish_requested) {
      shared_.finish_acked = shared_.finish_requested;
      shared_.phase = Phase::kIdle;
      shared_.assignment.reset();
    }
    shared_.changed.notify_all();
  }

  void open_socket() { socket_.emplace(connect_dealer(context_, endpoint_, options_)); }

  void close_socket() { socket_.reset(); }

  void send(const AgentMessage& message) {
    if (!socket_) open_socket();
    const Frames frames = encode(message);
    std::vector<zmq::const_buffer> buffers;
    for (const auto& f : frames) buffers.push_back(zmq::buffer(f));
    try {
      // dontwait: with a full queue the message is dropped; the next beat sends another.
      (void)zmq::send_multipart(*socket_, buffers, zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
      log_->debug("send to the rendezvous service failed: {}", e.what());
    }
  }

  zmq::context_t& context_;
  const std::string endpoint_;
  const RendezvousClientOptions& options_;
  Shared& shared_;
  const int wake_fd_;
  std::shared_ptr<spdlog::logger> log_;

  std::optional<zmq::socket_t> socket_;
  std::uint64_t join_epoch_ = 0;
  std::int64_t last_generation_;
  std::uint64_t resume_sent_ = 0;
  std::uint64_t restart_sent_ = 0;
  bool restart_pending_ = false;
  std::uint64_t leave_sent_ = 0;
  std::uint64_t finish_sent_ = 0;
  int reconnects_ = 0;
  milliseconds backoff_{0};
  Clock::time_point next_reconnect_{};
  Clock::time_point last_iteration_{};  // forgive_own_pause()
};

Status status_locked(const Shared& s, const std::string& node_id) {
  switch (s.phase) {
    case Phase::kAssigned: return Status::ok();
    case Phase::kEnded: return Status(StatusCode::kAborted, s.message);
    case Phase::kLost: return Status(StatusCode::kUnavailable, s.message);
    case Phase::kFailed: return Status(StatusCode::kFailedPrecondition, s.message);
    case Phase::kIdle:
    case Phase::kJoining: break;
  }
  return Status(StatusCode::kFailedPrecondition, "node '" + node_id + "' is not in a generation; call join()");
}

}  // namespace

struct RendezvousClient::Impl {
  Impl(std::string e, RendezvousClientOptions o) : endpoint(std::move(e)), options(std::move(o)) {}

  void wake() const {
    const std::uint64_t one = 1;
    // A full counter (impossible in practice) still leaves the thread readable: nothing lost.
    (void)!::write(wake_fd.get(), &one, sizeof one);
  }

  const std::string endpoint;
  const RendezvousClientOptions options;
  zmq::context_t context{1};  // declared before the thread: outlives the socket it owns
  UniqueFd wake_fd;           // closed after the thread that polls it is joined (~RendezvousClient)
  Shared shared;
  std::thread thread;
};

RendezvousClient::RendezvousClient(std::string endpoint, RendezvousClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(options))) {
  impl_->options.validate();
  // Connected here, so that an endpoint ZeroMQ cannot parse fails at once, and handed to the
  // client's thread as its first socket (a separate probe would break off its handshake, which
  // the service logs as a refused peer).
  std::optional<zmq::socket_t> first_socket;
  try {
    first_socket.emplace(connect_dealer(impl_->context, impl_->endpoint, impl_->options));
  } catch (const zmq::error_t& e) {
    throw RendezvousError("invalid rendezvous endpoint '" + impl_->endpoint + "': " + e.what() +
                          "; expected e.g. tcp://host:port");
  }
  impl_->wake_fd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!impl_->wake_fd) throw RendezvousError("rendezvous client: eventfd failed: " + std::to_string(errno));
  // The socket moves to the client's thread here and is used only there from now on (thread
  // creation is the memory barrier ZeroMQ asks for when a socket changes threads).
  auto thread = std::make_unique<ClientThread>(impl_->context, impl_->endpoint, impl_->options, impl_->shared,
                                               impl_->wake_fd.get(), std::move(*first_socket));
  impl_->thread = std::thread([thread = std::move(thread)] { thread->run(); });
}

RendezvousClient::~RendezvousClient() {
  {
    std::lock_guard<std::mutex> lock(impl_->shared.mutex);
    impl_->shared.stop = true;
  }
  impl_->wake();
  if (impl_->thread.joinable()) impl_->thread.join();
  impl_->wake_fd.reset();
}

StatusOr<Assignment> RendezvousClient::join(std::chrono::milliseconds timeout, int master_port) {
  if (master_port < 0 || master_port > 65535) {
    throw ConfigError("RendezvousClient::join: master_port " + std::to_string(master_port) + " is not in 0..65535");
  }
  const auto deadline = Clock::now() + timeout;
  Shared& s = impl_->shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.phase = Phase::kJoining;
  s.master_port = master_port;
  s.assignment.reset();
  s.message.clear();
  s.last_wait.reset();
  const std::uint64_t epoch = ++s.join_epoch;
  impl_->wake();
  s.changed.wait_until(lock, deadline, [&] { return s.phase != Phase::kJoining || s.join_epoch != epoch; });
  if (s.join_epoch != epoch) {
    return Status(StatusCode::kAborted, "another join() on node '" + impl_->options.node_id() + "' replaced this one");
  }
  switch (s.phase) {
    case Phase::kAssigned: return *s.assignment;
    case Phase::kFailed: return Status(StatusCode::kFailedPrecondition, s.message);
    case Phase::kLost: return Status(StatusCode::kUnavailable, s.message);
    case Phase::kJoining: break;
    case Phase::kIdle:
    case Phase::kEnded: return status_locked(s, impl_->options.node_id());
  }
  s.phase = Phase::kIdle;  // stop joining; the service forgets this node after interval x liveness
  std::string progress;
  if (s.last_wait) {
    progress = "the service had " + std::to_string(s.last_wait->joined) + " node(s) waiting for generation " +
               std::to_string(s.last_wait->next_generation) + " (min " + std::to_string(s.last_wait->min_nodes) +
               ", max " + std::to_string(s.last_wait->max_nodes) + ")";
  } else {
    progress = "the service never answered";
  }
  return Status(StatusCode::kDeadlineExceeded, "node '" + impl_->options.node_id() + "' joined the rendezvous at " +
                                                   impl_->endpoint + " but no generation formed within " +
                                                   std::to_string(timeout.count()) + " ms; " + progress);
}

Status RendezvousClient::status() const {
  std::lock_guard<std::mutex> lock(impl_->shared.mutex);
  return status_locked(impl_->shared, impl_->options.node_id());
}

Status RendezvousClient::watch(std::chrono::milliseconds timeout) {
  Shared& s = impl_->shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.changed.wait_for(lock, timeout, [&] { return s.phase != Phase::kAssigned; });
  return status_locked(s, impl_->options.node_id());
}

Status RendezvousClient::set_resume_step(std::int64_t step, std::chrono::milliseconds timeout) {
  Shared& s = impl_->shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  s.resume_step = step;
  const std::uint64_t request = ++s.resume_requested;
  impl_->wake();
  if (s.changed.wait_for(lock, timeout, [&] { return s.resume_acked >= request; })) return Status::ok();
  return Status(StatusCode::kDeadlineExceeded, "the rendezvous service at " + impl_->endpoint +
                                                   " did not acknowledge resume step " + std::to_string(step) +
                                                   " within " + std::to_string(timeout.count()) + " ms");
}

Status RendezvousClient::request_restart(const std::string& reason, std::chrono::milliseconds timeout) {
  Shared& s = impl_->shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.phase != Phase::kAssigned) {
    return s.phase == Phase::kEnded ? Status::ok() : status_locked(s, impl_->options.node_id());
  }
  s.restart_reason = reason.substr(0, kMaxTextBytes);
  ++s.restart_requested;
  impl_->wake();
  if (s.changed.wait_for(lock, timeout, [&] { return s.phase != Phase::kAssigned; })) {
    return s.phase == Phase::kEnded ? Status::ok() : status_locked(s, impl_->options.node_id());
  }
  return Status(StatusCode::kDeadlineExceeded, "the rendezvous service at " + impl_->endpoint +
                                                   " did not confirm the restart request within " +
                                                   std::to_string(timeout.count()) + " ms");
}

Status RendezvousClient::leave(std::chrono::milliseconds timeout) {
  Shared& s = impl_->shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  const std::uint64_t request = ++s.leave_requested;
  impl_->wake();
  if (s.changed.wait_for(lock, timeout, [&] { return s.leave_acked >= request; })) return Status::ok();
  return Status(StatusCode::kDeadlineExceeded, "the rendezvous service at " + impl_->endpoint +
                                                   " did not acknowledge that node '" + impl_->options.node_id() +
                                                   "' left within " + std::to_string(timeout.count()) + " ms");
}

Status RendezvousClient::finish(std::chrono::milliseconds timeout) {
  Shared& s = impl_->shared;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!s.assignment) {
    lock.unlock();
    return leave(timeout);
  }
  s.finish_generation = s.assignment->generation;
  const std::uint64_t request = ++s.finish_requested;
  impl_->wake();
  if (s.changed.wait_for(lock, timeout, [&] { return s.finish_acked >= request; })) return Status::ok();
  return Status(StatusCode::kDeadlineExceeded, "the rendezvous service at " + impl_->endpoint +
                                                   " did not acknowledge that node '" + impl_->options.node_id() +
                                                   "' finished within " + std::to_string(timeout.count()) + " ms");
}

const std::string& RendezvousClient::endpoint() const { return impl_->endpoint; }

const RendezvousClientOptions& RendezvousClient::options() const { return impl_->options; }

}  // namespace tenax::elastic
