// ZmqStoreClient: the Store a worker process uses to reach the KvService (kv_protocol.h).
//
// One DEALER socket (linger 0, ZMQ_IMMEDIATE so nothing queues for a service that is not
// connected), used by one thread at a time. Every request carries a fresh request id, and a
// reply with another id (a late answer to a request that timed out) is dropped. get() and
// wait() are parked by the service until the keys exist or their timeout passes; the client
// waits for that answer at most reply_grace() longer (so that the service's word on which keys
// are missing is the one reported), and a dead service surfaces as TimeoutError, never a hang.
// The grace follows the measured round trip: with a fixed 100 ms, every answer over a link with
// a 400 ms round trip came too late and was dropped, and a checkpoint commit that polls the store
// in short gets never completed (tests/netns: rtt400).
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <deque>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include <unistd.h>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kv_protocol.h"
#include "peer_guard.h"
#include "store_values.h"
#include "tenax/core/error.h"
#include "tenax/elastic/kv_service.h"
#include "tenax/elastic/store.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using detail::KvOp;
using detail::KvStatus;
using detail::ReplyHeader;
using detail::RequestHeader;

// How long past a get/wait timeout the client still waits for the service's own answer, at
// least; reply_grace() is twice the recent round trip when that is longer, up to kMaxReplyGrace.
constexpr std::chrono::milliseconds kReplyGrace{100};
constexpr std::chrono::milliseconds kMaxReplyGrace{10000};
// Requests remembered for round-trip samples (late answers to abandoned ones included).
constexpr std::size_t kTrackedRequests = 64;

std::string as_string(const zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

std::chrono::milliseconds left_until(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return std::max(left, std::chrono::milliseconds(0));
}

// Unique per process and per instance: the ROUTER needs distinct identities, and a restarted
// worker must not inherit its predecessor's.
std::string make_routing_id() {
  static std::atomic<unsigned> instances{0};
  char host[64] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return std::string("tenax/") + host + "/" + std::to_string(::getpid()) + "/" + std::to_string(instances++);
}

class ZmqStoreClient final : public Store {
 public:
  ZmqStoreClient(std::string endpoint, std::chrono::milliseconds request_timeout, const std::optional<JobKeys>& keys)
      : socket_(context_, zmq::socket_type::dealer),
        endpoint_(std::move(endpoint)),
        request_timeout_(request_timeout),
        curve_(keys.has_value()) {
    socket_.set(zmq::sockopt::linger, 0);
    if (keys) detail::make_curve_client(socket_, *keys);
    socket_.set(zmq::sockopt::immediate, true);
    socket_.set(zmq::sockopt::reconnect_ivl, 100);
    socket_.set(zmq::sockopt::reconnect_ivl_max, 1000);
    socket_.set(zmq::sockopt::routing_id, make_routing_id());
    try {
      socket_.connect(endpoint_);
    } catch (const zmq::error_t& e) {
      throw RendezvousError("invalid rendezvous endpoint '" + endpoint_ + "': " + e.what() +
                            "; expected e.g. tcp://host:port (TENAX_RDZV_ENDPOINT)");
    }
  }

  void ping(std::chrono::milliseconds timeout) {
    auto reply = round_trip({KvOp::kPing, 0, 0}, {}, Clock::now() + timeout);
    if (!reply || reply->header.status != KvStatus::kOk) {
      throw RendezvousError("cannot reach the rendezvous key-value service at " + endpoint_ + " within " +
                            std::to_string(timeout.count()) +
                            " ms; check TENAX_RDZV_ENDPOINT, that the launcher agent is running and that " +
                            (curve_ ? "$TENAX_KEYS_FILE is this job's key file (the agent's log names refused peers)"
                                    : "the service does not require the job's keys (set TENAX_KEYS_FILE)"));
    }
  }

  void set(const std::string& key, const std::vector<char>& value) override {
    auto reply =
        round_trip({KvOp::kSet, 0, 0}, {zmq::buffer(key), zmq::buffer(value)}, Clock::now() + request_timeout_);
    if (!reply) throw no_answer("set('" + key + "')");
    expect(*reply, KvStatus::kOk, "set('" + key + "')");
  }

  std::vector<char> get(const std::string& key, std::chrono::milliseconds timeout) override {
    auto reply =
        round_trip({KvOp::kGet, 0, timeout.count()}, {zmq::buffer(key)}, Clock::now() + timeout + reply_grace());
    if (!reply) throw TimeoutError(detail::missing_keys_message({key}, timeout, where()));
    if (reply->header.status == KvStatus::kNotFound) {
      throw TimeoutError(detail::missing_keys_message({key}, timeout, where()));
    }
    expect(*reply, KvStatus::kValue, "get('" + key + "')");
    const auto& value = reply->frames.at(0);
    const char* data = static_cast<const char*>(value.data());
    return std::vector<char>(data, data + value.size());
  }

  std::int64_t add(const std::string& key, std::int64_t delta) override {
    const std::string encoded = detail::encode_i64(delta);
    auto reply =
        round_trip({KvOp::kAdd, 0, 0}, {zmq::buffer(key), zmq::buffer(encoded)}, Clock::now() + request_timeout_);
    if (!reply) throw no_answer("add('" + key + "')");
    expect(*reply, KvStatus::kValue, "add('" + key + "')");
    if (reply->frames.size() != 1 || reply->frames[0].size() != 8) {
      throw RendezvousError("malformed add('" + key + "') reply from " + endpoint_);
    }
    return static_cast<std::int64_t>(detail::get_u64(static_cast<const char*>(reply->frames[0].data())));
  }

  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    if (keys.empty()) return;
    std::vector<zmq::const_buffer> args;
    for (const auto& key : keys) args.push_back(zmq::buffer(key));
    auto reply = round_trip({KvOp::kWait, 0, timeout.count()}, args, Clock::now() + timeout + reply_grace());
    if (!reply) throw TimeoutError(detail::missing_keys_message(keys, timeout, where()));
    if (reply->header.status == KvStatus::kNotFound) {
      std::vector<std::string> missing;
      for (const auto& f : reply->frames) missing.push_back(as_string(f));
      throw TimeoutError(detail::missing_keys_message(missing, timeout, where()));
    }
    expect(*reply, KvStatus::kOk, "wait(" + detail::quote_keys(keys) + ")");
  }

 private:
  struct Reply {
    ReplyHeader header;
    std::vector<zmq::message_t> frames;  // after the header
  };

  std::string where() const { return "rendezvous service " + endpoint_; }

  TimeoutError no_answer(const std::string& what) const {
    return TimeoutError("the rendezvous key-value service at " + endpoint_ + " did not answer " + what + " within " +
                        std::to_string(request_timeout_.count()) + " ms; is the launcher agent alive?");
  }

  void expect(const Reply& reply, KvStatus status, const std::string& what) const {
    if (reply.header.status == status) return;
    if (reply.header.status == KvStatus::kError && !reply.frames.empty()) {
      throw RendezvousError(what + " failed at " + endpoint_ + ": " + as_string(reply.frames[0]));
    }
    throw RendezvousError(what + ": unexpected reply status " + std::to_string(static_cast<int>(reply.header.status)) +
                          " from " + endpoint_);
  }

  std::chrono::milliseconds reply_grace() const { return std::clamp(rtt_ * 2, kReplyGrace, kMaxReplyGrace); }

  // A reply to request `id` arrived now: a round-trip sample, unless the service may have held
  // the request for an unknown part of its timeout (a get/wait answered with a value).
  void note_reply(std::uint64_t id, KvStatus status) {
    const auto it = std::find_if(sent_.begin(), sent_.end(), [id](const Sent& s) { return s.id == id; });
    if (it == sent_.end()) return;
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - it->at);
    if (it->parked.count() > 0) {
      if (status != KvStatus::kNotFound) return;
      took -= it->parked;  // held the whole timeout, then answered
    }
    const auto sample = std::max(took, std::chrono::milliseconds(0));
    // A slowly decaying maximum: one slow answer raises the grace at once, and it comes down
    // over a few dozen fast ones.
    rtt_ = std::max(sample, (rtt_ * 15 + sample) / 16);
  }

  // Sends one request and waits for its reply; nullopt when `deadline` passes first.
  std::optional<Reply> round_trip(RequestHeader header, const std::vector<zmq::const_buffer>& args,
                                  Clock::time_point deadline) {
    header.request_id = next_request_id_++;
    const bool parks = header.op == KvOp::kGet || header.op == KvOp::kWait;
    sent_.push_back({header.request_id, Clock::now(), std::chrono::milliseconds(parks ? header.timeout_ms : 0)});
    if (sent_.size() > kTrackedRequests) sent_.pop_front();
    const std::string encoded = header.encode();
    std::vector<zmq::const_buffer> frames{zmq::buffer(encoded)};
    frames.insert(frames.end(), args.begin(), args.end());
    // With ZMQ_IMMEDIATE the send blocks while no connection is up: bound it by the deadline.
    socket_.set(zmq::sockopt::sndtimeo, static_cast<int>(left_until(deadline).count()));
    if (!zmq::send_multipart(socket_, frames)) return std::nullopt;

    while (true) {
      const auto left = left_until(deadline);
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(&item, 1, left);
      } catch (const zmq::error_t& e) {
        if (e.num() != EINTR) throw;
      }
      if (!(item.revents & ZMQ_POLLIN)) {
        if (left.count() == 0) return std::nullopt;
        continue;
      }
      std::vector<zmq::message_t> received;
      if (!zmq::recv_multipart(socket_, std::back_inserter(received), zmq::recv_flags::dontwait)) continue;
      Reply reply;
      if (received.empty() || !reply.header.decode(received[0].data(), received[0].size())) continue;
      note_reply(reply.header.request_id, reply.header.status);
      if (reply.header.request_id != header.request_id) continue;  // late answer to an abandoned request
      std::move(received.begin() + 1, received.end(), std::back_inserter(reply.frames));
      return reply;
    }
  }

  zmq::context_t context_{1};  // declared first: destroyed after the socket
  zmq::socket_t socket_;
  std::string endpoint_;
  std::chrono::milliseconds request_timeout_;
  bool curve_;
  std::uint64_t next_request_id_ = 1;
  struct Sent {
    std::uint64_t id;
    Clock::time_point at;
    std::chrono::milliseconds parked;  // the timeout the service may hold it for (get/wait)
  };
  std::deque<Sent> sent_;
  std::chrono::milliseconds rtt_{0};  // recent round trip (note_reply)
};

}  // namespace

std::unique_ptr<Store> connect_store(const std::string& endpoint, std::chrono::milliseconds connect_timeout,
                                     const std::optional<JobKeys>& keys) {
  auto client = std::make_unique<ZmqStoreClient>(endpoint, connect_timeout, keys);
  client->ping(connect_timeout);
  return client;
}

}  // namespace tenax::elastic
