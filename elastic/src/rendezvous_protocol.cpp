#include "rendezvous_protocol.h"

#include <limits>
#include <type_traits>

#include "kv_protocol.h"  // put_u64 / get_u64: the same little-endian integers as the KV protocol

namespace tenax::elastic::detail {
namespace {

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

class Writer {
 public:
  explicit Writer(RdzvType type) {
    frames_.push_back(std::string{static_cast<char>(kRdzvVersion), static_cast<char>(type)});
  }
  Writer& text(const std::string& value) {
    frames_.push_back(value);
    return *this;
  }
  Writer& i64(std::int64_t value) {
    frames_.push_back(encode_i64(value));
    return *this;
  }
  Frames done() { return std::move(frames_); }

 private:
  Frames frames_;
};

// Reads the frames after the header in order; the first failure is kept in `why`.
class Reader {
 public:
  Reader(const Frames& frames, std::size_t expected_fields, std::string& why) : frames_(frames), why_(why) {
    if (frames.size() != expected_fields + 1) {
      fail("expected " + std::to_string(expected_fields) + " field(s) after the header, got " +
           std::to_string(frames.size() - 1));
    }
  }
  bool ok() const { return ok_; }

  std::string name(const char* what) {
    std::string value = next();
    if (ok_ && (value.empty() || value.size() > kMaxNameBytes)) {
      fail(std::string(what) + " must be 1.." + std::to_string(kMaxNameBytes) + " bytes, got " +
           std::to_string(value.size()));
    }
    return value;
  }
  std::string text(const char* what) {
    std::string value = next();
    if (ok_ && value.size() > kMaxTextBytes) {
      fail(std::string(what) + " is longer than " + std::to_string(kMaxTextBytes) + " bytes");
    }
    return value;
  }
  std::int64_t i64(const char* what, std::int64_t low, std::int64_t high) {
    const std::string value = next();
    if (!ok_) return 0;
    if (value.size() != 8) {
      fail(std::string(what) + " must be an 8-byte integer, got " + std::to_string(value.size()) + " bytes");
      return 0;
    }
    const auto v = static_cast<std::int64_t>(get_u64(value.data()));
    if (v < low || v > high) {
      fail(std::string(what) + "=" + std::to_string(v) + " is out of range [" + std::to_string(low) + ", " +
           std::to_string(high) + "]");
      return 0;
    }
    return v;
  }

 private:
  std::string next() {
    if (!ok_ || index_ >= frames_.size()) return {};
    return frames_[index_++];
  }
  void fail(const std::string& why) {
    if (!ok_) return;
    ok_ = false;
    why_ = why;
  }

  const Frames& frames_;
  std::string& why_;
  std::size_t index_ = 1;
  bool ok_ = true;
};

constexpr std::int64_t kAny = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kAnyLow = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kMaxPort = 65535;

// The type in frame 0, or nullopt (with `why`) when it is not a header of ours.
std::optional<RdzvType> header(const Frames& frames, std::string& why) {
  if (frames.empty() || frames[0].size() != 2) {
    why = frames.empty() ? "empty message" : "header frame of " + std::to_string(frames[0].size()) + " bytes, not 2";
    return std::nullopt;
  }
  const auto version = static_cast<std::uint8_t>(frames[0][0]);
  if (version != kRdzvVersion) {
    why = "protocol version " + std::to_string(version) + ", expected " + std::to_string(kRdzvVersion);
    return std::nullopt;
  }
  return static_cast<RdzvType>(static_cast<std::uint8_t>(frames[0][1]));
}

template <typename T>
std::optional<T> checked(const Reader& reader, T value) {
  if (!reader.ok()) return std::nullopt;
  return value;
}

}  // namespace

Frames encode(const AgentMessage& message) {
  return std::visit(
      [](const auto& m) -> Frames {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, JoinMsg>) {
          return Writer(RdzvType::kJoin)
              .text(m.node)
              .text(m.host)
              .i64(m.local_workers)
              .i64(m.last_generation)
              .i64(m.master_port)
              .done();
        } else if constexpr (std::is_same_v<T, HeartbeatMsg>) {
          return Writer(RdzvType::kHeartbeat).text(m.node).i64(m.generation).done();
        } else if constexpr (std::is_same_v<T, ResumeStepMsg>) {
          return Writer(RdzvType::kResumeStep).text(m.node).i64(m.step).done();
        } else if constexpr (std::is_same_v<T, RestartMsg>) {
          return Writer(RdzvType::kRestart).text(m.node).i64(m.generation).text(m.reason).done();
        } else if constexpr (std::is_same_v<T, LeaveMsg>) {
          return Writer(RdzvType::kLeave).text(m.node).done();
        } else {
          return Writer(RdzvType::kFinished).text(m.node).i64(m.generation).done();
        }
      },
      message);
}

Frames encode(const ServiceMessage& message) {
  return std::visit(
      [](const auto& m) -> Frames {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, WaitMsg>) {
          return Writer(RdzvType::kWait).i64(m.next_generation).i64(m.joined).i64(m.min_nodes).i64(m.max_nodes).done();
        } else if constexpr (std::is_same_v<T, AssignMsg>) {
          const Assignment& a = m.assignment;
          return Writer(RdzvType::kAssign)
              .i64(a.generation)
              .i64(a.node_rank)
              .i64(a.num_nodes)
              .i64(a.rank_offset)
              .i64(a.local_world_size)
              .i64(a.world_size)
              .i64(a.resume_step)
              .text(a.store_prefix)
              .text(a.store_endpoint)
              .text(a.master_host)
              .i64(a.master_port)
              .done();
        } else if constexpr (std::is_same_v<T, PulseMsg>) {
          return Writer(RdzvType::kPulse)
              .i64(static_cast<std::int64_t>(m.state))
              .i64(m.generation)
              .text(m.reason)
              .done();
        } else if constexpr (std::is_same_v<T, FailedMsg>) {
          return Writer(RdzvType::kFailed).text(m.message).done();
        } else {
          return Writer(RdzvType::kAck).i64(static_cast<std::int64_t>(m.of)).i64(m.value).done();
        }
      },
      message);
}

std::optional<AgentMessage> decode_agent_message(const Frames& frames, std::string& why) {
  const auto type = header(frames, why);
  if (!type) return std::nullopt;
  switch (*type) {
    case RdzvType::kJoin: {
      Reader r(frames, 5, why);
      JoinMsg m;
      m.node = r.name("node id");
      m.host = r.name("host");
      m.local_workers = r.i64("local_workers", 1, kMaxLocalWorkers);
      m.last_generation = r.i64("last_generation", -1, kAny);
      m.master_port = r.i64("master_port", 0, kMaxPort);
      return checked<AgentMessage>(r, m);
    }
    case RdzvType::kHeartbeat: {
      Reader r(frames, 2, why);
      HeartbeatMsg m;
      m.node = r.name("node id");
      m.generation = r.i64("generation", -1, kAny);
      return checked<AgentMessage>(r, m);
    }
    case RdzvType::kResumeStep: {
      Reader r(frames, 2, why);
      ResumeStepMsg m;
      m.node = r.name("node id");
      m.step = r.i64("step", kAnyLow, kAny);
      return checked<AgentMessage>(r, m);
    }
    case RdzvType::kRestart: {
      Reader r(frames, 3, why);
      RestartMsg m;
      m.node = r.name("node id");
      m.generation = r.i64("generation", -1, kAny);
      m.reason = r.text("reason");
      return checked<AgentMessage>(r, m);
    }
    case RdzvType::kLeave: {
      Reader r(frames, 1, why);
      LeaveMsg m;
      m.node = r.name("node id");
      return checked<AgentMessage>(r, m);
    }
    case RdzvType::kFinished: {
      Reader r(frames, 2, why);
      FinishedMsg m;
      m.node = r.name("node id");
      m.generation = r.i64("generation", -1, kAny);
      return checked<AgentMessage>(r, m);
    }
    default:
      why = "message type " + std::to_string(static_cast<int>(*type)) + " is not one an agent sends";
      return std::nullopt;
  }
}

std::optional<ServiceMessage> decode_service_message(const Frames& frames, std::string& why) {
  const auto type = header(frames, why);
  if (!type) return std::nullopt;
  switch (*type) {
    case RdzvType::kWait: {
      Reader r(frames, 4, why);
      WaitMsg m;
      m.next_generation = r.i64("next_generation", 0, kAny);
      m.joined = r.i64("joined", 0, kAny);
      m.min_nodes = r.i64("min_nodes", 1, kIntMax);
      m.max_nodes = r.i64("max_nodes", 1, kIntMax);
      return checked<ServiceMessage>(r, m);
    }
    case RdzvType::kAssign: {
      Reader r(frames, 11, why);
      AssignMsg m;
      Assignment& a = m.assignment;
      a.generation = r.i64("generation", 0, kAny);
      a.node_rank = static_cast<int>(r.i64("node_rank", 0, kIntMax));
      a.num_nodes = static_cast<int>(r.i64("num_nodes", 1, kIntMax));
      a.rank_offset = static_cast<int>(r.i64("rank_offset", 0, kIntMax));
      a.local_world_size = static_cast<int>(r.i64("local_world_size", 1, kMaxLocalWorkers));
      a.world_size = static_cast<int>(r.i64("world_size", 1, kIntMax));
      a.resume_step = r.i64("resume_step", kAnyLow, kAny);
      a.store_prefix = r.name("store_prefix");
      a.store_endpoint = r.name("store_endpoint");
      a.master_host = r.name("master_host");
      a.master_port = static_cast<int>(r.i64("master_port", 0, kMaxPort));
      if (r.ok() && (a.node_rank >= a.num_nodes || std::int64_t{a.rank_offset} + a.local_world_size > a.world_size)) {
        why = "inconsistent ranks: node " + std::to_string(a.node_rank) + " of " + std::to_string(a.num_nodes) +
              ", ranks " + std::to_string(a.rank_offset) + "+" + std::to_string(a.local_world_size) + " of " +
              std::to_string(a.world_size);
        return std::nullopt;
      }
      return checked<ServiceMessage>(r, m);
    }
    case RdzvType::kPulse: {
      Reader r(frames, 3, why);
      PulseMsg m;
      m.state = static_cast<PulseState>(r.i64("state", 0, 2));
      m.generation = r.i64("generation", -1, kAny);
      m.reason = r.text("reason");
      return checked<ServiceMessage>(r, m);
    }
    case RdzvType::kFailed: {
      Reader r(frames, 1, why);
      FailedMsg m;
      m.message = r.text("message");
      return checked<ServiceMessage>(r, m);
    }
    case RdzvType::kAck: {
      Reader r(frames, 2, why);
      AckMsg m;
      m.of = static_cast<RdzvType>(r.i64("acknowledged type", 0, 255));
      m.value = r.i64("value", kAnyLow, kAny);
      return checked<ServiceMessage>(r, m);
    }
    default:
      why = "message type " + std::to_string(static_cast<int>(*type)) + " is not one the service sends";
      return std::nullopt;
  }
}

std::string printable(const std::string& bytes, std::size_t limit) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (char c : bytes) {
    if (out.size() >= limit) {
      out += "...";
      break;
    }
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  return out;
}

}  // namespace tenax::elastic::detail
