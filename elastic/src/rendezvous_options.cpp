// Validation of the rendezvous option objects (rendezvous.h, rendezvous_service.h,
// rendezvous_client.h): every setter checks its value and names the option when it is wrong.
#include <string>
#include <utility>

#include "rendezvous_protocol.h"
#include "tenax/core/error.h"
#include "tenax/elastic/rendezvous.h"
#include "tenax/elastic/rendezvous_client.h"
#include "tenax/elastic/rendezvous_service.h"

namespace tenax::elastic {
namespace {

constexpr int kMaxNodes = 65536;

[[noreturn]] void invalid(const std::string& option, const std::string& value, const std::string& why) {
  throw ConfigError("rendezvous option " + option + "=" + value + " is invalid: " + why);
}

std::string ms_text(std::chrono::milliseconds v) { return std::to_string(v.count()) + "ms"; }

}  // namespace

HeartbeatOptions& HeartbeatOptions::interval(std::chrono::milliseconds value) {
  if (value < std::chrono::milliseconds(10)) invalid("heartbeat interval", ms_text(value), "must be at least 10ms");
  interval_ = value;
  return *this;
}

HeartbeatOptions& HeartbeatOptions::liveness(int value) {
  if (value < 2) invalid("heartbeat liveness", std::to_string(value), "must be at least 2 missed beats");
  liveness_ = value;
  return *this;
}

RendezvousOptions::RendezvousOptions(int min_nodes, int max_nodes) : min_nodes_(min_nodes), max_nodes_(max_nodes) {
  if (min_nodes < 1) invalid("min_nodes", std::to_string(min_nodes), "must be at least 1");
  if (max_nodes < min_nodes || max_nodes > kMaxNodes) {
    invalid("max_nodes", std::to_string(max_nodes),
            "must be in [min_nodes, " + std::to_string(kMaxNodes) + "] with min_nodes=" + std::to_string(min_nodes));
  }
}

RendezvousOptions& RendezvousOptions::last_call(std::chrono::milliseconds value) {
  if (value.count() < 0) invalid("last_call", ms_text(value), "must not be negative");
  last_call_ = value;
  return *this;
}

RendezvousOptions& RendezvousOptions::join_timeout(std::chrono::milliseconds value) {
  if (value.count() <= 0) invalid("join_timeout", ms_text(value), "must be positive");
  join_timeout_ = value;
  return *this;
}

RendezvousOptions& RendezvousOptions::heartbeat(const HeartbeatOptions& value) {
  heartbeat_ = value;
  return *this;
}

RendezvousOptions& RendezvousOptions::resume_step(std::int64_t value) {
  resume_step_ = value;
  return *this;
}

RendezvousOptions& RendezvousOptions::generations_above(std::int64_t value) {
  if (value < -1) throw ConfigError("rendezvous: generations_above must be >= -1, got " + std::to_string(value));
  generations_above_ = value;
  return *this;
}

RendezvousOptions& RendezvousOptions::claim_generation(std::function<StatusOr<std::int64_t>(std::int64_t)> value) {
  claim_generation_ = std::move(value);
  return *this;
}

RendezvousOptions& RendezvousOptions::keys(JobKeys value) {
  keys_ = std::move(value);
  return *this;
}

RendezvousClientOptions::RendezvousClientOptions(std::string node_id, std::string host, int local_workers)
    : node_id_(std::move(node_id)), host_(std::move(host)), local_workers_(local_workers) {
  if (node_id_.empty() || node_id_.size() > detail::kMaxNameBytes) {
    invalid("node_id", "'" + detail::printable(node_id_) + "'",
            "must be 1.." + std::to_string(detail::kMaxNameBytes) + " bytes");
  }
  if (host_.empty() || host_.size() > detail::kMaxNameBytes) {
    invalid("host", "'" + detail::printable(host_) + "'",
            "must be 1.." + std::to_string(detail::kMaxNameBytes) + " bytes");
  }
  if (local_workers < 1 || local_workers > detail::kMaxLocalWorkers) {
    invalid("local_workers", std::to_string(local_workers),
            "must be in [1, " + std::to_string(detail::kMaxLocalWorkers) + "]");
  }
}

RendezvousClientOptions& RendezvousClientOptions::heartbeat(const HeartbeatOptions& value) {
  heartbeat_ = value;
  return *this;
}

RendezvousClientOptions& RendezvousClientOptions::reconnect_backoff_max(std::chrono::milliseconds value) {
  reconnect_backoff_max_ = value;
  return *this;
}

RendezvousClientOptions& RendezvousClientOptions::service_timeout(std::chrono::milliseconds value) {
  service_timeout_ = value;
  return *this;
}

RendezvousClientOptions& RendezvousClientOptions::last_generation(std::int64_t value) {
  last_generation_ = value;
  return *this;
}

RendezvousClientOptions& RendezvousClientOptions::keys(JobKeys value) {
  keys_ = std::move(value);
  return *this;
}

// The timing options depend on each other and setters come in any order: checked once, by
// the client that uses them.
void RendezvousClientOptions::validate() const {
  if (reconnect_backoff_max_ < heartbeat_.interval()) {
    invalid("reconnect_backoff_max", ms_text(reconnect_backoff_max_),
            "must be at least the heartbeat interval (" + ms_text(heartbeat_.interval()) + ")");
  }
  if (service_timeout_ <= heartbeat_.expiry()) {
    invalid("service_timeout", ms_text(service_timeout_),
            "must be longer than heartbeat interval x liveness (" + ms_text(heartbeat_.expiry()) + ")");
  }
}

}  // namespace tenax::elastic
