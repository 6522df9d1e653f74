#include "membership.h"

#include <algorithm>
#include <utility>

#include "tenax/core/logging.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic::detail {
namespace {

using std::chrono::milliseconds;

long long ms_since(Membership::Clock::time_point since, Membership::Clock::time_point now) {
  return std::chrono::duration_cast<milliseconds>(now - since).count();
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

Membership::Membership(RendezvousOptions options, std::string store_endpoint, MembershipHooks hooks)
    : options_(std::move(options)),
      store_endpoint_(std::move(store_endpoint)),
      hooks_(std::move(hooks)),
      resume_step_(options_.resume_step()),
      log_(logger("tenax.elastic")) {}

std::chrono::milliseconds Membership::tick_interval() const {
  return std::max(milliseconds(5), options_.heartbeat().interval() / 5);
}

Outbox Membership::handle(const std::string& routing_id, const AgentMessage& message, Clock::time_point now) {
  forgive_own_stall(now);
  std::visit([&](const auto& m) { on(routing_id, m, now); }, message);
  return std::exchange(outbox_, {});
}

Outbox Membership::tick(Clock::time_point now) {
  forgive_own_stall(now);
  run_clocks(now);
  return std::exchange(outbox_, {});
}

// The pump calls in at least every tick_interval(). A longer gap means the service itself did
// not run (its hosting agent was paused or starved): the nodes' heartbeats wait unread in the
// socket, and the silence is the service's, not theirs. Without this, a rendezvous host that
// was paused for longer than the heartbeat expiry declared every node dead when it woke, and
// ended a generation that was running fine.
void Membership::forgive_own_stall(Clock::time_point now) {
  const auto gap = now - last_call_;
  const bool first = last_call_ == Clock::time_point{};
  last_call_ = std::max(last_call_, now);
  if (first || gap <= options_.heartbeat().expiry() / 2) return;
  log_->warn(
      "the rendezvous service did not run for {} ms (was its host paused?); that gap is not counted as "
      "the nodes' silence",
      std::chrono::duration_cast<milliseconds>(gap).count());
  for (auto& entry : nodes_) entry.second.last_seen += gap;
  if (round_opened_) *round_opened_ += gap;
  if (min_reached_) *min_reached_ += gap;
}

void Membership::number_above(std::int64_t generation) {
  if (generation < next_generation_) return;
  next_generation_ = generation + 1;
  dirty_ = true;
}

Membership::Node& Membership::touch(const std::string& routing_id, const std::string& node_id, Clock::time_point now) {
  const bool known = nodes_.count(node_id) != 0;
  if (!known) dirty_ = true;  // the snapshot lists the live nodes
  Node& node = nodes_[node_id];
  if (known && now - node.last_seen > node.longest_silence) {
    node.longest_silence = now - node.last_seen;
    dirty_ = true;
  }
  node.id = node_id;
  node.routing_id = routing_id;
  node.last_seen = now;
  return node;
}

// A node that left or finished in good health: its longest silence stays in the statistics.
void Membership::forget(const std::string& node_id) {
  const auto it = nodes_.find(node_id);
  if (it == nodes_.end()) return;
  longest_silence_ = std::max(longest_silence_, it->second.longest_silence);
  nodes_.erase(it);
}

bool Membership::is_member(const std::string& node_id) const {
  return running_ && running_->assignments.count(node_id) != 0;
}

void Membership::on(const std::string& routing_id, const JoinMsg& m, Clock::time_point now) {
  Node& node = touch(routing_id, m.node, now);
  node.host = m.host;
  node.local_workers = static_cast<int>(m.local_workers);
  node.master_port = static_cast<int>(m.master_port);
  if (m.last_generation >= next_generation_) {
    // A joiner saw a generation this service never formed: the service was restarted, or this
    // is a new host that took over. Numbering goes on above it, so that generations never
    // repeat (workers' store prefixes and checkpoint temporaries carry the number) and so that
    // the JOINs queued while no service answered are not taken for re-joins below.
    log_->info("node '{}' was in generation {} of an earlier rendezvous host; the next generation is {}", m.node,
               m.last_generation, m.last_generation + 1);
    number_above(m.last_generation);
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
      log_->info("node '{}' ({}) waits as a spare: generation {} already has the maximum of {} node(s)", m.node, m.host,
                 running_->number, options_.max_nodes());
    }
  } else {
    add_waiting(m.node);
  }
  run_clocks(now);
  if (std::find(waiting_.begin(), waiting_.end(), m.node) != waiting_.end()) {
    send(nodes_.at(m.node), WaitMsg{next_generation_, static_cast<std::int64_t>(waiting_.size()), options_.min_nodes(),
                                    options_.max_nodes()});
  }
}

void Membership::on(const std::string& routing_id, const HeartbeatMsg& m, Clock::time_point now) {
  if (nodes_.count(m.node) == 0) {
    // Declared dead (a false alarm: it was paused, or its link was cut), left, or this service
    // is new: its generation is over for it, and it must join again (the client stops its
    // workers on this answer and the agent joins the next generation).
    return send_to(routing_id, PulseMsg{PulseState::kUnknownNode, m.generation,
                                        "the rendezvous service does not know node '" + m.node +
                                            "' (declared dead, left, or the service restarted); join again"});
  }
  send(touch(routing_id, m.node, now), pulse_for(m.node, m.generation));
}

void Membership::on(const std::string& routing_id, const ResumeStepMsg& m, Clock::time_point now) {
  if (nodes_.count(m.node) != 0) touch(routing_id, m.node, now);
  if (resume_step_ != m.step) {
    log_->info("resume step set to {} by node '{}'", m.step, m.node);
    resume_step_ = m.step;
    dirty_ = true;
  }
  send_to(routing_id, AckMsg{RdzvType::kResumeStep, m.step});
}

void Membership::on(const std::string& routing_id, const RestartMsg& m, Clock::time_point now) {
  if (nodes_.count(m.node) == 0) {
    return send_to(routing_id, PulseMsg{PulseState::kUnknownNode, m.generation,
                                        "the rendezvous service does not know node '" + m.node + "'; join again"});
  }
  Node& node = touch(routing_id, m.node, now);
  if (is_member(m.node) && running_->number == m.generation) {
    request_restart("node '" + m.node + "' asked for it: " + m.reason);
  }
  send(node, pulse_for(m.node, m.generation));
}

void Membership::on(const std::string& routing_id, const LeaveMsg& m, Clock::time_point /*now*/) {
  if (is_member(m.node)) request_restart("node '" + m.node + "' left");
  forget(m.node);
  remove_waiting(m.node);
  dirty_ = true;
  log_->info("node '{}' left", m.node);
  send_to(routing_id, AckMsg{RdzvType::kLeave, 0});
}

// A node whose workers all finished leaves without ending the generation: the others finish
// their own workers (or, if one of them fails later, re-rendezvous without it).
void Membership::on(const std::string& routing_id, const FinishedMsg& m, Clock::time_point /*now*/) {
  if (is_member(m.node) && running_->number == m.generation) {
    if (std::find(running_->finished.begin(), running_->finished.end(), m.node) == running_->finished.end()) {
      running_->finished.push_back(m.node);
      log_->info("node '{}' finished generation {} ({} of {} node(s) finished)", m.node, m.generation,
                 running_->finished.size(), running_->members.size());
    }
  } else if (is_member(m.node)) {
    request_restart("node '" + m.node + "' finished generation " + std::to_string(m.generation) + " and left");
  }
  forget(m.node);
  remove_waiting(m.node);
  dirty_ = true;
  send_to(routing_id, AckMsg{RdzvType::kFinished, m.generation});
}

PulseMsg Membership::pulse_for(const std::string& node_id, std::int64_t generation) const {
  if (running_ && running_->number == generation && is_member(node_id)) {
    if (running_->restart) return {PulseState::kRestart, generation, running_->reason};
    return {PulseState::kOk, generation, ""};
  }
  if (generation < 0) return {PulseState::kOk, generation, ""};
  return {PulseState::kRestart, generation,
          "generation " + std::to_string(generation) + " is over" +
              (running_ ? " (generation " + std::to_string(running_->number) + " has formed)" : std::string())};
}

void Membership::add_waiting(const std::string& node_id) {
  if (std::find(waiting_.begin(), waiting_.end(), node_id) != waiting_.end()) return;
  waiting_.push_back(node_id);
  dirty_ = true;
}

void Membership::remove_waiting(const std::string& node_id) {
  const auto it = std::remove(waiting_.begin(), waiting_.end(), node_id);
  if (it == waiting_.end()) return;
  waiting_.erase(it, waiting_.end());
  dirty_ = true;
}

void Membership::request_restart(const std::string& reason) {
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

void Membership::run_clocks(Clock::time_point now) {
  expire_silent_nodes(now);
  update_round_clocks(now);
  if (!round_active() || waiting_.empty()) return;
  const int joined = static_cast<int>(waiting_.size());
  if (joined >= options_.max_nodes()) return form();
  // The last call is for nodes that may still come to a job's first generation (up to MAX). A
  // re-form closes as soon as every live member of the ending generation has joined again:
  // waiting longer would hold the survivors idle for a node that is gone (in-process recovery
  // waits on exactly this), and a node that comes later opens a round of its own.
  const bool window_over = min_reached_ && now - *min_reached_ >= options_.last_call();
  if (joined >= options_.min_nodes() && (window_over || running_) && outstanding() == 0) return form();
  if (now - *round_opened_ >= options_.join_timeout()) {
    if (joined >= options_.min_nodes()) return form();
    std::vector<std::string> who;
    for (const auto& id : waiting_) who.push_back(id + " (" + nodes_.at(id).host + ")");
    return fail_round("rendezvous for generation " + std::to_string(next_generation_) +
                      " failed: " + std::to_string(waiting_.size()) + " node(s) joined within the join timeout of " +
                      std::to_string(options_.join_timeout().count()) + " ms, fewer than the minimum of " +
                      std::to_string(options_.min_nodes()) + " (max " + std::to_string(options_.max_nodes()) +
                      "): " + join_names(who) + "; start more nodes, lower the minimum or raise the join timeout");
  }
}

void Membership::expire_silent_nodes(Clock::time_point now) {
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
                            std::to_string(expiry.count()) +
                            " ms = " + std::to_string(options_.heartbeat().interval().count()) + " ms x " +
                            std::to_string(options_.heartbeat().liveness()) + ")";
    if (is_member(node.id) && running_->restart) {
      // The generation is already ending; say that this node will not be in the next one.
      log_->warn("{}; generation {} is already ending ({}); the next one forms without it unless it comes back", why,
                 running_->number, running_->reason);
    } else if (is_member(node.id)) {
      request_restart(why);
    } else {
      log_->warn("{}; dropped", why);
    }
  }
}

void Membership::update_round_clocks(Clock::time_point now) {
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
int Membership::outstanding() const {
  if (!running_) return 0;
  int n = 0;
  for (const auto& id : running_->members) {
    if (nodes_.count(id) != 0 && std::find(waiting_.begin(), waiting_.end(), id) == waiting_.end()) ++n;
  }
  return n;
}

void Membership::form() {
  std::int64_t number = next_generation_;
  if (hooks_.claim_generation) {
    StatusOr<std::int64_t> claimed = hooks_.claim_generation(number);
    if (!claimed.is_ok()) {
      return fail_round("rendezvous for generation " + std::to_string(number) +
                        " failed: the job's generation fence refused it: " + claimed.status().message());
    }
    if (claimed.value() != number) {
      log_->warn(
          "generation {} was already claimed in the job's generation fence (another rendezvous host formed "
          "it); this one is generation {}",
          number, claimed.value());
      number = claimed.value();
    }
  }
  const std::size_t take = std::min<std::size_t>(waiting_.size(), static_cast<std::size_t>(options_.max_nodes()));
  std::vector<std::string> members(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(take));
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(take));
  std::sort(members.begin(), members.end());

  std::optional<std::int64_t> previous;
  if (running_) previous = running_->number;
  Generation g;
  g.number = number;
  next_generation_ = number + 1;
  g.members = members;
  int offset = 0;
  for (const auto& id : members) offset += nodes_.at(id).local_workers;
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
    a.store_endpoint = store_endpoint_;
    a.master_host = nodes_.at(members[0]).host;
    a.master_port = nodes_.at(members[0]).master_port;
    g.assignments[node.id] = a;
    layout += (layout.empty() ? "" : ", ") + node.id + " ranks " + std::to_string(offset) + ".." +
              std::to_string(offset + node.local_workers - 1);
    offset += node.local_workers;
  }
  running_ = std::move(g);
  round_opened_.reset();
  min_reached_.reset();
  dirty_ = true;
  log_->info("generation {} formed: {} node(s), world size {} ({}); resume step {}", running_->number, members.size(),
             running_->world_size, layout, resume_step_);
  if (previous && hooks_.drop_store_prefix) hooks_.drop_store_prefix(generation_prefix(*previous));
  for (const auto& id : running_->members) send(nodes_.at(id), AssignMsg{running_->assignments.at(id)});
}

void Membership::fail_round(const std::string& message) {
  log_->error("{}", message);
  const std::vector<std::string> failed = std::move(waiting_);
  waiting_.clear();
  round_opened_.reset();
  min_reached_.reset();
  last_failure_ = message;
  dirty_ = true;
  for (const auto& id : failed) send(nodes_.at(id), FailedMsg{message});
}

void Membership::send(const Node& node, ServiceMessage message) { send_to(node.routing_id, std::move(message)); }

void Membership::send_to(const std::string& routing_id, ServiceMessage message) {
  outbox_.push_back({routing_id, std::move(message)});
}

RendezvousSnapshot Membership::snapshot() const {
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
  s.last_failure = last_failure_;
  Clock::duration longest = longest_silence_;
  for (const auto& entry : nodes_) longest = std::max(longest, entry.second.longest_silence);
  s.longest_silence_ms = std::chrono::duration_cast<milliseconds>(longest).count();
  return s;
}

}  // namespace tenax::elastic::detail
