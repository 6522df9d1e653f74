#include "tenax/elastic/host_election.h"

#include <algorithm>
#include <utility>

#include "tenax/core/error.h"

namespace tenax::elastic {

HostElectionOptions::HostElectionOptions(int position, std::chrono::milliseconds lease_timeout)
    : position_(position), lease_timeout_(lease_timeout) {
  if (position < 0) throw ConfigError("host election: the node's position in the node list must be >= 0");
  if (lease_timeout.count() <= 0) throw ConfigError("host election: the lease timeout must be > 0 ms");
}

HostElectionOptions& HostElectionOptions::stagger_step(std::chrono::milliseconds value) {
  if (value.count() < 0) throw ConfigError("host election: the stagger step must be >= 0 ms");
  stagger_step_ = value;
  return *this;
}

HostElection::HostElection(std::string node_id, HostElectionOptions options)
    : node_id_(std::move(node_id)), options_(options) {}

void HostElection::observe(const std::optional<LeaseRecord>& lease, Clock::time_point now, std::int64_t now_unix_ms) {
  if (!first_observed_) first_observed_ = now;
  if (!lease) return;  // a lease never disappears once written; a failed read changes nothing
  highest_generation_ = std::max(highest_generation_, lease->generation);
  const bool changed = !lease_ || lease_->term != lease->term || lease_->beat != lease->beat;
  if (changed) {
    // The first sight of a lease says nothing about its liveness but its wall-clock age; every
    // later change of the beat proves a renewal.
    const bool first_sight = !lease_;
    beat_changed_ = now;
    long_dead_ = first_sight && now_unix_ms - lease->renewed_unix_ms > 3 * options_.lease_timeout().count();
    lease_ = lease;
  }
}

HostElection::Decision HostElection::decide(Clock::time_point now) const {
  Decision d;
  const auto patience = options_.lease_timeout() + options_.stagger();
  if (!lease_) {
    const bool designated = options_.position() == 0;
    const bool waited = first_observed_ && now - *first_observed_ >= patience;
    if (designated || waited) {
      d.action = Action::kClaim;
      d.term = 0;
      d.reason = designated
                     ? "no rendezvous lease yet, and this is the job's first node"
                     : "no rendezvous lease appeared within " +
                           std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(patience).count()) +
                           " ms";
    } else {
      d.reason = "waiting for the first node to write the rendezvous lease";
    }
    return d;
  }
  const auto silent = now - beat_changed_;
  // A long-dead lease needs no watching, but the positions still take their turns: after a
  // requeue every agent finds the released lease at once, and the lowest live position claims.
  const bool waited_turn = first_observed_ && now - *first_observed_ >= options_.stagger();
  const bool dead = (long_dead_ && waited_turn) || silent >= patience;
  if (!dead) {
    d.action = Action::kConnect;
    d.lease = *lease_;
    d.reason = "node '" + lease_->holder + "' holds the rendezvous lease (term " + std::to_string(lease_->term) + ")";
    return d;
  }
  d.action = Action::kClaim;
  d.term = lease_->term + 1;
  d.reason = long_dead_ ? "the rendezvous lease of node '" + lease_->holder + "' (term " +
                              std::to_string(lease_->term) + ") was last renewed long ago"
                        : "the rendezvous lease of node '" + lease_->holder + "' (term " +
                              std::to_string(lease_->term) + ") was not renewed for " +
                              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(silent).count()) +
                              " ms (lease timeout " + std::to_string(options_.lease_timeout().count()) +
                              " ms + this node's stagger " + std::to_string(options_.stagger().count()) + " ms)";
  return d;
}

}  // namespace tenax::elastic
