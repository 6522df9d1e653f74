#include "tenax/elastic/rendezvous_service.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "membership.h"
#include "peer_guard.h"
#include "rendezvous_protocol.h"
#include "tenax/core/endpoint.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using namespace detail;

// Messages handled per poll wake-up before the clocks are looked at again.
constexpr int kMaxBatch = 256;
// Malformed messages logged per second; the rest are counted and summarised.
constexpr int kMalformedLogsPerSecond = 10;

// "tcp://host:PORT" → "tcp://host:0" (the store binds the same interface, any port).
std::string any_port_on(const std::string& endpoint) {
  if (endpoint.find("://") == std::string::npos) return endpoint;  // not TCP (inproc://, ipc://)
  return Endpoint::parse(endpoint, /*allow_any_port=*/true).with_port(0).str();
}

// Runs on the service thread; owns the ROUTER and the control socket, and pumps: frames in →
// decode → Membership (membership.h, where every decision is) → frames out. Malformed input is
// this side's business: it never reaches the state machine.
class RendezvousServer {
 public:
  RendezvousServer(const RendezvousOptions& options, zmq::socket_t router, zmq::socket_t control, KvService& kv,
                   std::mutex& snapshot_mutex, RendezvousSnapshot& snapshot)
      : membership_(options, kv.endpoint(), hooks(options, kv)),
        router_(std::move(router)),
        control_(std::move(control)),
        snapshot_mutex_(snapshot_mutex),
        snapshot_(snapshot),
        tick_(membership_.tick_interval()),
        log_(logger("tenax.elastic")) {
    membership_.number_above(options.generations_above());
  }

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      log_->error("rendezvous service stopped on an internal error: {}", e.what());
    }
  }

 private:
  static MembershipHooks hooks(const RendezvousOptions& options, KvService& kv) {
    MembershipHooks h;
    h.claim_generation = options.claim_generation();
    h.drop_store_prefix = [&kv](const std::string& prefix) {
      try {
        kv.drop_prefix(prefix);
      } catch (const Error& e) {
        logger("tenax.elastic")->warn("could not drop the store keys under '{}': {}", prefix, e.what());
      }
    };
    return h;
  }

  void serve() {
    publish();
    while (true) {
      zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {control_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, tick_);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
      if (items[1].revents & ZMQ_POLLIN) return;  // STOP (the only control message)
      if (items[0].revents & ZMQ_POLLIN) {
        for (int i = 0; i < kMaxBatch; ++i) {
          std::vector<zmq::message_t> frames;
          if (!zmq::recv_multipart(router_, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
          handle(frames);
        }
      }
      const auto now = Clock::now();
      if (now - malformed_window_ >= std::chrono::seconds(1)) flush_malformed_summary();
      deliver(membership_.tick(now));
      if (membership_.dirty() || publish_needed_) publish();
    }
  }

  // One message as received: routing id, then the protocol frames. Nothing a peer sends may
  // stop the service: malformed input is counted, logged (rate-limited) and dropped.
  void handle(const std::vector<zmq::message_t>& raw) {
    if (raw.empty()) return;
    const std::string routing_id = raw[0].to_string();
    Frames frames;
    for (std::size_t i = 1; i < raw.size(); ++i) frames.push_back(raw[i].to_string());
    std::string why;
    const auto message = decode_agent_message(frames, why);
    if (!message) return malformed(routing_id, why);
    try {
      deliver(membership_.handle(routing_id, *message, Clock::now()));
    } catch (const std::exception& e) {
      // A bug of ours, not the peer's: say so, and keep serving the other nodes.
      log_->error("rendezvous service: handling a message from '{}' failed: {}", printable(routing_id), e.what());
    }
  }

  void malformed(const std::string& routing_id, const std::string& why) {
    ++malformed_;
    publish_needed_ = true;
    const auto now = Clock::now();
    if (now - malformed_window_ >= std::chrono::seconds(1)) {
      flush_malformed_summary();
      malformed_window_ = now;
      malformed_logged_ = 0;
    }
    if (malformed_logged_ < kMalformedLogsPerSecond) {
      ++malformed_logged_;
      log_->warn("rendezvous service: ignored a malformed message from '{}': {}", printable(routing_id), why);
    } else {
      ++malformed_suppressed_;
    }
  }

  void flush_malformed_summary() {
    if (malformed_suppressed_ == 0) return;
    log_->warn("rendezvous service: {} more malformed message(s) ignored", malformed_suppressed_);
    malformed_suppressed_ = 0;
  }

  void deliver(const Outbox& outbox) {
    // Whatever an agent learns, snapshot() already shows (tests and `tenax rdzv` rely on it).
    if (!outbox.empty() && (membership_.dirty() || publish_needed_)) publish();
    for (const Outgoing& out : outbox) send_to(out.routing_id, out.message);
  }

  void send_to(const std::string& routing_id, const ServiceMessage& message) {
    const Frames frames = encode(message);
    std::vector<zmq::const_buffer> buffers{zmq::buffer(routing_id)};
    for (const auto& f : frames) buffers.push_back(zmq::buffer(f));
    try {
      // dontwait: an agent that stopped reading must not stall the service.
      if (!zmq::send_multipart(router_, buffers, zmq::send_flags::dontwait)) {
        log_->warn("dropped a message to '{}': its queue is full", printable(routing_id));
      }
    } catch (const zmq::error_t& e) {
      // EHOSTUNREACH (ROUTER_MANDATORY): that socket is gone; its node will re-join or expire.
      log_->debug("dropped a message to '{}': {}", printable(routing_id), e.what());
    }
  }

  void publish() {
    RendezvousSnapshot s = membership_.snapshot();
    s.malformed_messages = malformed_;
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    snapshot_ = std::move(s);
    membership_.clear_dirty();
    publish_needed_ = false;
  }

  Membership membership_;
  zmq::socket_t router_;
  zmq::socket_t control_;
  std::mutex& snapshot_mutex_;
  RendezvousSnapshot& snapshot_;
  milliseconds tick_;

  std::uint64_t malformed_ = 0;
  bool publish_needed_ = false;  // malformed_ changed
  Clock::time_point malformed_window_{};
  int malformed_logged_ = 0;
  int malformed_suppressed_ = 0;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace

struct RendezvousService::Impl {
  explicit Impl(RendezvousOptions o) : options(std::move(o)), kv(options.keys()) {}

  RendezvousOptions options;
  zmq::context_t context{1};                 // declared before the sockets: destroyed after them
  std::unique_ptr<detail::PeerGuard> guard;  // with keys; outlives the service thread's use of the ROUTER
  std::shared_ptr<std::atomic<std::uint64_t>> refused = std::make_shared<std::atomic<std::uint64_t>>(0);
  zmq::socket_t control;  // the owner's end of the inproc control pair
  KvService kv;           // used by the service thread between start() and stop()
  std::thread thread;
  std::string endpoint;
  mutable std::mutex snapshot_mutex;
  RendezvousSnapshot snapshot;
};

RendezvousService::RendezvousService(RendezvousOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

RendezvousService::~RendezvousService() {
  try {
    stop();
  } catch (const std::exception& e) {
    logger("tenax.elastic")->error("stopping the rendezvous service: {}", e.what());
  }
}

std::string RendezvousService::start(const std::string& bind_endpoint, const std::string& store_bind_endpoint) {
  if (impl_->thread.joinable()) throw RendezvousError("the rendezvous service already serves at " + impl_->endpoint);
  static std::atomic<unsigned> instances{0};
  const std::string control_endpoint = "inproc://tenax-rdzv-control-" + std::to_string(instances++);

  zmq::socket_t router(impl_->context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::router_mandatory, true);
  if (impl_->options.keys()) {
    impl_->guard = std::make_unique<detail::PeerGuard>(impl_->context, router, *impl_->options.keys(),
                                                       "rendezvous service", impl_->refused);
  }
  try {
    router.bind(bind_endpoint);
  } catch (const zmq::error_t& e) {
    impl_->guard.reset();
    throw RendezvousError("cannot bind the rendezvous service to '" + bind_endpoint + "': " + e.what() +
                          "; choose a free port or another address");
  }
  const std::string bound = router.get(zmq::sockopt::last_endpoint);
  try {
    impl_->kv.start(store_bind_endpoint.empty() ? any_port_on(bind_endpoint) : store_bind_endpoint);
  } catch (...) {
    router.close();
    impl_->guard.reset();
    throw;
  }

  zmq::socket_t server_control(impl_->context, zmq::socket_type::pair);
  server_control.set(zmq::sockopt::linger, 0);
  server_control.bind(control_endpoint);
  zmq::socket_t control(impl_->context, zmq::socket_type::pair);
  control.set(zmq::sockopt::linger, 0);
  control.connect(control_endpoint);

  {
    std::lock_guard<std::mutex> lock(impl_->snapshot_mutex);
    impl_->snapshot = RendezvousSnapshot{};
    impl_->snapshot.resume_step = impl_->options.resume_step();
  }
  // The sockets move to the service thread here and are used only there from now on (thread
  // creation is the memory barrier ZeroMQ asks for when a socket changes threads); so is the
  // KvService's control socket, until stop() has joined the thread.
  auto server = std::make_unique<RendezvousServer>(impl_->options, std::move(router), std::move(server_control),
                                                   impl_->kv, impl_->snapshot_mutex, impl_->snapshot);
  impl_->thread = std::thread([server = std::move(server)] { server->run(); });
  impl_->control = std::move(control);
  impl_->endpoint = bound;
  const auto& o = impl_->options;
  logger("tenax.elastic")
      ->info(
          "rendezvous service listening at {} (store {}): {}..{} node(s), last call {} ms, join timeout {} ms, "
          "heartbeat {} ms x {}, {}",
          bound, impl_->kv.endpoint(), o.min_nodes(), o.max_nodes(), o.last_call().count(), o.join_timeout().count(),
          o.heartbeat().interval().count(), o.heartbeat().liveness(),
          o.keys() ? "CURVE: the job's keys only" : "no CURVE: anyone who reaches the port may join");
  return bound;
}

void RendezvousService::stop() {
  if (!impl_->thread.joinable()) return;
  // If the send fails the service thread has already ended; join returns at once then.
  (void)impl_->control.send(zmq::str_buffer("STOP"), zmq::send_flags::dontwait);
  impl_->thread.join();
  impl_->control.close();
  impl_->guard.reset();
  impl_->kv.stop();
  impl_->endpoint.clear();
}

std::string RendezvousService::endpoint() const { return impl_->endpoint; }

std::string RendezvousService::store_endpoint() const { return impl_->kv.endpoint(); }

const RendezvousOptions& RendezvousService::options() const { return impl_->options; }

RendezvousSnapshot RendezvousService::snapshot() const {
  RendezvousSnapshot s;
  {
    std::lock_guard<std::mutex> lock(impl_->snapshot_mutex);
    s = impl_->snapshot;
  }
  s.refused_peers = impl_->refused->load() + impl_->kv.refused_peers();
  return s;
}

}  // namespace tenax::elastic
