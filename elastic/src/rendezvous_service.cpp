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

#include "peer_guard.h"
#include "rendezvous_protocol.h"
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

long long ms_since(Clock::time_point since, Clock::time_point now) {
  return std::chrono::duration_cast<milliseconds>(now - since).count();
}

// "tcp://host:PORT" → "tcp://host:0" (the store binds the same interface, any port).
std::string any_port_on(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || endpoint.find("://") == std::string::npos) return endpoint;
  return endpoint.substr(0, colon) + ":0";
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// Runs on the service thread; owns the ROUTER, the control socket and all membership state.
class RendezvousServer {
 public:
  RendezvousServer(RendezvousOptions options, zmq::socket_t router, zmq::socket_t control, KvService& kv,
                   std::mutex& snapshot_mutex, RendezvousSnapshot& snapshot)
      : options_(std::move(options)),
        router_(std::move(router)),
        control_(std::move(control)),
        kv_(kv),
        snapshot_mutex_(snapshot_mutex),
        snapshot_(snapshot),
        resume_step_(options_.resume_step()),
        log_(logger("tenax.elastic")) {
    // Sweep often enough that a death is declared within a fifth of an interval of its expiry.
    tick_ = std::max(milliseconds(5), options_.heartbeat().interval() / 5);
  }

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      log_->error("rendezvous service stopped on an internal error: {}", e.what());
    }
  }

 private:
  struct Node {
    std::string id;
    std::string host;
    int local_workers = 1;
    std::string routing_id;  // return address of the node's current socket
    Clock::time_point last_seen;
  };
  struct Generation {
    std::int64_t number = 0;
    std::vector<std::string> members;  // node ids in rank order
    std::map<std::string, Assignment> assignments;
    int world_size = 0;
    bool restart = false;
    std::string reason;
    std::vector<std::string> finished;  // members whose workers all finished (FINISHED), in order
  };

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
      tick(Clock::now());
      if (dirty_) publish();
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
      std::visit([&](const auto& m) { on(routing_id, m); }, *message);
    } catch (const std::exception& e) {
      // A bug of ours, not the peer's: say so, and keep serving the other nodes.
      log_->error("rendezvous service: handling a message from '{}' failed: {}", printable(routing_id), e.what());
    }
  }

  void malformed(const std::string& routing_id, const std::string& why) {
    ++malformed_;
    dirty_ = true;
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

  Node& touch(const std::string& routing_id, const std::string& node_id) {
    if (nodes_.count(node_id) == 0) dirty_ = true;  // the snapshot lists the live nodes
    Node& node = nodes_[node_id];
    node.id = node_id;
    node.routing_id = routing_id;
    node.last_seen = Clock::now();
    return node;
  }

  bool is_member(const std::string& node_id) const {
    return running_ && running_->assignments.count(node_id) != 0;
  }

  void on(const std::string& routing_id, const JoinMsg& m) {
    Node& node = touch(routing_id, m.node);
    node.host = m.host;
    node.local_workers = static_cast<int>(m.local_workers);
    if (m.last_generation >= next_generation_) {
      // A joiner saw a generation this service never formed: the service was restarted (its
      // hosting agent came back). Numbering goes on above it, so that generations never repeat
      // (workers' store prefixes and checkpoint temporaries carry the number) and so that the
      // JOINs it queued while the service was down are not taken for re-joins below.
      log_->info("node '{}' was in generation {} of an earlier run of this service; the next generation is {}",
                 m.node, m.last_generation, m.last_generation + 1);
      next_generation_ = m.last_generation + 1;
      dirty_ = true;
    }
    if (is_member(m.node)) {
      if (!running_->restart && m.last_generation != running_->number) {
        // It never saw this generation's ASSIGN (lost with an old socket, or a JOIN queued
        // before the generation formed): send it again. Only a JOIN from a node that got this
        // generation's ASSIGN is a re-join.
        send(node, AssignMsg{running_->assignments.at(m.node)});
        return;
      }
      request_restart("node '" + m.node + "' re-joined");
      add_waiting(m.node);
    } else if (running_ && !running_->restart) {
      add_waiting(m.node);
      if (!running_->finished.empty()) {
        // Some members are done: the job is ending, and a new generation would restart it.
        log_->info("node '{}' ({}) waits as a spare: generation {} is finishing ({} of {} node(s) finished)", m.node,
                   m.host, running_->number, running_->finished.size(), running_->members.size());
      } else if (static_cast<int>(running_->members.size()) < options_.max_nodes()) {
        request_restart("node '" + m.node + "' joined; the next generation can have " +
                        std::to_string(running_->members.size() + 1) + " node(s)");
      } else {
        log_->info("node '{}' ({}) waits as a spare: generation {} already has the maximum of {} node(s)", m.node,
                   m.host, running_->number, options_.max_nodes());
      }
    } else {
      add_waiting(m.node);
    }
    tick(Clock::now());
    if (std::find(waiting_.begin(), waiting_.end(), m.node) != waiting_.end()) {
      send(node, WaitMsg{next_generation_, static_cast<std::int64_t>(waiting_.size()), options_.min_nodes(),
                         options_.max_nodes()});
    }
  }

  void on(const std::string& routing_id, const HeartbeatMsg& m) {
    if (nodes_.count(m.node) == 0) {
      return send_to(routing_id, PulseMsg{PulseState::kUnknownNode, m.generation,
                                          "the rendezvous service does not know node '" + m.node +
                                              "' (declared dead, left, or the service restarted); join again"});
    }
    send(touch(routing_id, m.node), pulse_for(m.node, m.generation));
  }

  void on(const std::string& routing_id, const ResumeStepMsg& m) {
    if (nodes_.count(m.node) != 0) touch(routing_id, m.node);
    if (resume_step_ != m.step) {
      log_->info("resume step set to {} by node '{}'", m.step, m.node);
      resume_step_ = m.step;
      dirty_ = true;
    }
    send_to(routing_id, AckMsg{RdzvType::kResumeStep, m.step});
  }

  void on(const std::string& routing_id, const RestartMsg& m) {
    if (nodes_.count(m.node) == 0) {
      return send_to(routing_id, PulseMsg{PulseState::kUnknownNode, m.generation,
                                          "the rendezvous service does not know node '" + m.node + "'; join again"});
    }
    Node& node = touch(routing_id, m.node);
    if (is_member(m.node) && running_->number == m.generation) {
      request_restart("node '" + m.node + "' asked for it: " + m.reason);
    }
    send(node, pulse_for(m.node, m.generation));
  }

  void on(const std::string& routing_id, const LeaveMsg& m) {
    if (is_member(m.node)) request_restart("node '" + m.node + "' left");
    nodes_.erase(m.node);
    remove_waiting(m.node);
    dirty_ = true;
    log_->info("node '{}' left", m.node);
    send_to(routing_id, AckMsg{RdzvType::kLeave, 0});
  }

  // A node whose workers all finished leaves without ending the generation: the others finish
  // their own workers (or, if one of them fails later, re-rendezvous without it).
  void on(const std::string& routing_id, const FinishedMsg& m) {
    if (is_member(m.node) && running_->number == m.generation) {
      if (std::find(running_->finished.begin(), running_->finished.end(), m.node) == running_->finished.end()) {
        running_->finished.push_back(m.node);
        log_->info("node '{}' finished generation {} ({} of {} node(s) finished)", m.node, m.generation,
                   running_->finished.size(), running_->members.size());
      }
    } else if (is_member(m.node)) {
      request_restart("node '" + m.node + "' finished generation " + std::to_string(m.generation) + " and left");
    }
    nodes_.erase(m.node);
    remove_waiting(m.node);
    dirty_ = true;
    send_to(routing_id, AckMsg{RdzvType::kFinished, m.generation});
  }

  PulseMsg pulse_for(const std::string& node_id, std::int64_t generation) const {
    if (running_ && running_->number == generation && is_member(node_id)) {
      if (running_->restart) return {PulseState::kRestart, generation, running_->reason};
      return {PulseState::kOk, generation, ""};
    }
    if (generation < 0) return {PulseState::kOk, generation, ""};
    return {PulseState::kRestart, generation,
            "generation " + std::to_string(generation) + " is over" +
                (running_ ? " (generation " + std::to_string(running_->number) + " has formed)" : std::string())};
  }

  void add_waiting(const std::string& node_id) {
    if (std::find(waiting_.begin(), waiting_.end(), node_id) != waiting_.end()) return;
    waiting_.push_back(node_id);
    dirty_ = true;
  }
  void remove_waiting(const std::string& node_id) {
    const auto it = std::remove(waiting_.begin(), waiting_.end(), node_id);
    if (it == waiting_.end()) return;
    waiting_.erase(it, waiting_.end());
    dirty_ = true;
  }

  void request_restart(const std::string& reason) {
    if (!running_ || running_->restart) return;
    running_->restart = true;
    running_->reason = reason;
    dirty_ = true;
    log_->warn("re-rendezvous requested for generation {}: {}", running_->number, reason);
    // Pushed at once rather than left for each member's next heartbeat reply (which says it
    // again): the survivors start stopping their workers up to an interval sooner.
    for (const auto& id : running_->members) {
      const auto node = nodes_.find(id);
      if (node != nodes_.end()) send(node->second, PulseMsg{PulseState::kRestart, running_->number, reason});
    }
  }

  // A round runs while no generation runs or the running one is ending.
  bool round_active() const { return !running_ || running_->restart; }

  void tick(Clock::time_point now) {
    if (now - malformed_window_ >= std::chrono::seconds(1)) flush_malformed_summary();
    expire_silent_nodes(now);
    update_round_clocks(now);
    if (!round_active() || waiting_.empty()) return;
    const int joined = static_cast<int>(waiting_.size());
    if (joined >= options_.max_nodes()) return form();
    const bool window_over = min_reached_ && now - *min_reached_ >= options_.last_call();
    if (joined >= options_.min_nodes() && window_over && outstanding() == 0) return form();
    if (now - *round_opened_ >= options_.join_timeout()) {
      if (joined >= options_.min_nodes()) return form();
      return fail_round();
    }
  }

  void expire_silent_nodes(Clock::time_point now) {
    const auto expiry = options_.heartbeat().expiry();
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      if (now - it->second.last_seen <= expiry) {
        ++it;
        continue;
      }
      const Node node = it->second;
      it = nodes_.erase(it);
      ++nodes_lost_;
      dirty_ = true;
      remove_waiting(node.id);
      const std::string why = "node '" + node.id + "' (" + node.host + ") missed heartbeats: silent for " +
                              std::to_string(ms_since(node.last_seen, now)) + " ms (limit " +
                              std::to_string(expiry.count()) + " ms = " +
                              std::to_string(options_.heartbeat().interval().count()) + " ms x " +
                              std::to_string(options_.heartbeat().liveness()) + ")";
      if (is_member(node.id) && running_->restart) {
        // The generation is already ending; say that this node will not be in the next one.
        log_->warn("{}; generation {} is already ending ({}); the next one forms without it", why,
                   running_->number, running_->reason);
      } else if (is_member(node.id)) {
        request_restart(why);
      } else {
        log_->warn("{}; dropped", why);
      }
    }
  }

  void update_round_clocks(Clock::time_point now) {
    if (!round_active() || waiting_.empty()) {
      round_opened_.reset();
      min_reached_.reset();
      return;
    }
    if (!round_opened_) {
      round_opened_ = now;
      log_->info("round for generation {} opened by '{}'", next_generation_, waiting_.front());
    }
    if (static_cast<int>(waiting_.size()) < options_.min_nodes()) {
      min_reached_.reset();
    } else if (!min_reached_) {
      min_reached_ = now;
    }
  }

  // Live members of the ending generation that have not joined the round yet.
  int outstanding() const {
    if (!running_) return 0;
    int n = 0;
    for (const auto& id : running_->members) {
      if (nodes_.count(id) != 0 && std::find(waiting_.begin(), waiting_.end(), id) == waiting_.end()) ++n;
    }
    return n;
  }

  void form() {
    const std::size_t take = std::min<std::size_t>(waiting_.size(), static_cast<std::size_t>(options_.max_nodes()));
    std::vector<std::string> members(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(take));
    waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(take));
    std::sort(members.begin(), members.end());

    std::optional<std::int64_t> previous;
    if (running_) previous = running_->number;
    Generation g;
    g.number = next_generation_++;
    g.members = members;
    int offset = 0;
    for (std::size_t i = 0; i < members.size(); ++i) offset += nodes_.at(members[i]).local_workers;
    g.world_size = offset;
    offset = 0;
    std::string layout;
    for (std::size_t i = 0; i < members.size(); ++i) {
      const Node& node = nodes_.at(members[i]);
      Assignment a;
      a.generation = g.number;
      a.node_rank = static_cast<int>(i);
      a.num_nodes = static_cast<int>(members.size());
      a.rank_offset = offset;
      a.local_world_size = node.local_workers;
      a.world_size = g.world_size;
      a.resume_step = resume_step_;
      a.store_prefix = generation_prefix(g.number);
      a.store_endpoint = kv_.endpoint();
      a.master_host = nodes_.at(members[0]).host;
      g.assignments[node.id] = a;
      layout += (layout.empty() ? "" : ", ") + node.id + " ranks " + std::to_string(offset) + ".." +
                std::to_string(offset + node.local_workers - 1);
      offset += node.local_workers;
    }
    running_ = std::move(g);
    round_opened_.reset();
    min_reached_.reset();
    dirty_ = true;
    log_->info("generation {} formed: {} node(s), world size {} ({}); resume step {}", running_->number,
               members.size(), running_->world_size, layout, resume_step_);
    if (previous) drop_store_prefix(generation_prefix(*previous));
    for (const auto& id : running_->members) send(nodes_.at(id), AssignMsg{running_->assignments.at(id)});
  }

  void drop_store_prefix(const std::string& prefix) {
    try {
      kv_.drop_prefix(prefix);
    } catch (const Error& e) {
      log_->warn("could not drop the store keys under '{}': {}", prefix, e.what());
    }
  }

  void fail_round() {
    std::vector<std::string> who;
    for (const auto& id : waiting_) who.push_back(id + " (" + nodes_.at(id).host + ")");
    const std::string message =
        "rendezvous for generation " + std::to_string(next_generation_) + " failed: " +
        std::to_string(waiting_.size()) + " node(s) joined within the join timeout of " +
        std::to_string(options_.join_timeout().count()) + " ms, fewer than the minimum of " +
        std::to_string(options_.min_nodes()) + " (max " + std::to_string(options_.max_nodes()) +
        "): " + join_names(who) + "; start more nodes, lower the minimum or raise the join timeout";
    log_->error("{}", message);
    const std::vector<std::string> failed = std::move(waiting_);
    waiting_.clear();
    round_opened_.reset();
    min_reached_.reset();
    last_failure_ = message;
    dirty_ = true;
    for (const auto& id : failed) send(nodes_.at(id), FailedMsg{message});
  }

  void send(const Node& node, const ServiceMessage& message) { send_to(node.routing_id, message); }

  void send_to(const std::string& routing_id, const ServiceMessage& message) {
    // Whatever an agent learns, snapshot() already shows (tests and `tenax rdzv` rely on it).
    if (dirty_) publish();
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
    RendezvousSnapshot s;
    if (running_) {
      s.generation = running_->number;
      s.members = running_->members;
      s.world_size = running_->world_size;
      s.restart_requested = running_->restart;
      s.restart_reason = running_->reason;
      s.finished = running_->finished;
    }
    for (const auto& entry : nodes_) s.live.push_back(entry.first);
    s.waiting = waiting_;
    s.resume_step = resume_step_;
    s.nodes_lost = nodes_lost_;
    s.malformed_messages = malformed_;
    s.last_failure = last_failure_;
    std::lock_guard<std::mutex> lock(snapshot_mutex_);
    snapshot_ = std::move(s);
    dirty_ = false;
  }

  const RendezvousOptions options_;
  zmq::socket_t router_;
  zmq::socket_t control_;
  KvService& kv_;
  std::mutex& snapshot_mutex_;
  RendezvousSnapshot& snapshot_;
  milliseconds tick_{100};

  std::map<std::string, Node> nodes_;  // every live agent, by node id
  std::vector<std::string> waiting_;   // node ids in join order
  std::optional<Generation> running_;  // the last generation formed
  std::int64_t next_generation_ = 0;
  std::optional<Clock::time_point> round_opened_;
  std::optional<Clock::time_point> min_reached_;
  std::int64_t resume_step_;
  std::uint64_t nodes_lost_ = 0;
  std::uint64_t malformed_ = 0;
  std::string last_failure_;
  bool dirty_ = true;

  Clock::time_point malformed_window_{};
  int malformed_logged_ = 0;
  int malformed_suppressed_ = 0;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace

struct RendezvousService::Impl {
  explicit Impl(RendezvousOptions o) : options(std::move(o)), kv(options.keys()) {}

  RendezvousOptions options;
  zmq::context_t context{1};  // declared before the sockets: destroyed after them
  std::unique_ptr<detail::PeerGuard> guard;  // with keys; outlives the service thread's use of the ROUTER
  std::shared_ptr<std::atomic<std::uint64_t>> refused = std::make_shared<std::atomic<std::uint64_t>>(0);
  zmq::socket_t control;      // the owner's end of the inproc control pair
  KvService kv;               // used by the service thread between start() and stop()
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
      ->info("rendezvous service listening at {} (store {}): {}..{} node(s), last call {} ms, join timeout {} ms, "
             "heartbeat {} ms x {}, {}",
             bound, impl_->kv.endpoint(), o.min_nodes(), o.max_nodes(), o.last_call().count(),
             o.join_timeout().count(), o.heartbeat().interval().count(), o.heartbeat().liveness(),
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
