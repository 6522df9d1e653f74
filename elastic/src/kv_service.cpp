#include "tenax/elastic/kv_service.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <iterator>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "kv_protocol.h"
#include "peer_guard.h"
#include "store_values.h"
#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::elastic {
namespace {

using Clock = std::chrono::steady_clock;
using detail::KvOp;
using detail::KvStatus;
using detail::ReplyHeader;
using detail::RequestHeader;

// A parked request can wait at most this long, whatever the client asked for.
constexpr std::chrono::hours kMaxParkedWait{24};
// Requests handled per poll wake-up before control messages and deadlines are looked at again.
constexpr int kMaxBatch = 256;

std::string as_string(const zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

// Runs on the service thread and owns both its sockets and the key-value map.
class KvServer {
 public:
  KvServer(zmq::socket_t router, zmq::socket_t control)
      : router_(std::move(router)), control_(std::move(control)), log_(logger("tenax.elastic")) {}

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      log_->error("rendezvous key-value service stopped on an internal error: {}", e.what());
    }
  }

 private:
  struct Parked {
    std::string routing_id;
    RequestHeader header;
    std::vector<std::string> keys;
    Clock::time_point deadline;
  };

  void serve() {
    while (true) {
      zmq::pollitem_t items[] = {{router_.handle(), 0, ZMQ_POLLIN, 0}, {control_.handle(), 0, ZMQ_POLLIN, 0}};
      try {
        zmq::poll(items, 2, poll_timeout());
      } catch (const zmq::error_t& e) {
        if (e.num() == EINTR) continue;
        throw;
      }
      if (items[1].revents & ZMQ_POLLIN) {
        if (!handle_control()) return;
      }
      if (items[0].revents & ZMQ_POLLIN) {
        for (int i = 0; i < kMaxBatch; ++i) {
          std::vector<zmq::message_t> frames;
          if (!zmq::recv_multipart(router_, std::back_inserter(frames), zmq::recv_flags::dontwait)) break;
          handle_request(frames);
        }
      }
      expire_parked(Clock::now());
    }
  }

  std::chrono::milliseconds poll_timeout() const {
    if (parked_.empty()) return std::chrono::milliseconds(-1);
    auto earliest = parked_.front().deadline;
    for (const auto& p : parked_) earliest = std::min(earliest, p.deadline);
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(earliest - Clock::now());
    return std::max(left, std::chrono::milliseconds(0));
  }

  // Returns false on STOP.
  bool handle_control() {
    std::vector<zmq::message_t> frames;
    if (!zmq::recv_multipart(control_, std::back_inserter(frames), zmq::recv_flags::dontwait)) return true;
    const std::string command = frames.empty() ? std::string() : as_string(frames[0]);
    if (command == "DROP" && frames.size() == 2) {
      const std::string prefix = as_string(frames[1]);
      std::size_t removed = 0;
      auto it = values_.lower_bound(prefix);
      while (it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0) {
        it = values_.erase(it);
        ++removed;
      }
      log_->debug("dropped {} key(s) under '{}'", removed, prefix);
      control_.send(zmq::buffer(std::to_string(removed)), zmq::send_flags::dontwait);
      return true;
    }
    return command != "STOP";
  }

  void handle_request(std::vector<zmq::message_t>& frames) {
    if (frames.size() < 2) return;  // not a client of ours
    const std::string routing_id = as_string(frames[0]);
    RequestHeader header;
    if (!header.decode(frames[1].data(), frames[1].size())) {
      log_->warn("ignored a malformed request from '{}'", routing_id);
      return;
    }
    std::vector<std::string> args;
    for (std::size_t i = 2; i < frames.size(); ++i) args.push_back(as_string(frames[i]));
    const auto fail = [&](const std::string& why) { reply(routing_id, {KvStatus::kError, header.request_id}, {why}); };
    try {
      switch (header.op) {
        case KvOp::kPing: reply(routing_id, {KvStatus::kOk, header.request_id}, {}); return;
        case KvOp::kSet:
          if (args.size() != 2) return fail("SET takes a key and a value");
          values_[args[0]] = std::move(args[1]);
          reply(routing_id, {KvStatus::kOk, header.request_id}, {});
          answer_parked();
          return;
        case KvOp::kAdd: {
          if (args.size() != 2 || args[1].size() != 8) return fail("ADD takes a key and an 8-byte delta");
          const auto delta = static_cast<std::int64_t>(detail::get_u64(args[1].data()));
          auto it = values_.find(args[0]);
          const std::int64_t current =
              it == values_.end() ? 0 : detail::parse_counter(args[0], {it->second.begin(), it->second.end()});
          const std::int64_t result = current + delta;
          const auto text = detail::encode_counter(result);
          values_[args[0]] = std::string(text.begin(), text.end());
          reply(routing_id, {KvStatus::kValue, header.request_id}, {detail::encode_i64(result)});
          answer_parked();
          return;
        }
        case KvOp::kGet:
          if (args.size() != 1) return fail("GET takes one key");
          break;
        case KvOp::kWait:
          if (args.empty()) return fail("WAIT takes at least one key");
          break;
        default: return fail("unknown operation " + std::to_string(static_cast<int>(header.op)));
      }
    } catch (const Error& e) {
      return fail(e.what());
    }
    // GET and WAIT: answer now, or park until the keys exist or the deadline passes.
    Parked parked{routing_id, header, std::move(args), {}};
    if (try_answer(parked)) return;
    const auto wait = std::min<std::chrono::milliseconds>(
        std::chrono::milliseconds(std::max<std::int64_t>(header.timeout_ms, 0)), kMaxParkedWait);
    if (wait.count() == 0) return answer_missing(parked);
    parked.deadline = Clock::now() + wait;
    parked_.push_back(std::move(parked));
  }

  // Answers `p` if all its keys exist.
  bool try_answer(const Parked& p) {
    for (const auto& key : p.keys) {
      if (values_.count(key) == 0) return false;
    }
    if (p.header.op == KvOp::kGet) {
      reply(p.routing_id, {KvStatus::kValue, p.header.request_id}, {values_.at(p.keys[0])});
    } else {
      reply(p.routing_id, {KvStatus::kOk, p.header.request_id}, {});
    }
    return true;
  }

  void answer_missing(const Parked& p) {
    std::vector<std::string> missing;
    for (const auto& key : p.keys) {
      if (values_.count(key) == 0) missing.push_back(key);
    }
    reply(p.routing_id, {KvStatus::kNotFound, p.header.request_id}, missing);
  }

  void answer_parked() {
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(), [&](const Parked& p) { return try_answer(p); }),
                  parked_.end());
  }

  void expire_parked(Clock::time_point now) {
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                                 [&](const Parked& p) {
                                   if (p.deadline > now) return false;
                                   answer_missing(p);
                                   return true;
                                 }),
                  parked_.end());
  }

  void reply(const std::string& routing_id, const ReplyHeader& header, const std::vector<std::string>& payload) {
    std::vector<zmq::const_buffer> frames;
    const std::string encoded = header.encode();
    frames.push_back(zmq::buffer(routing_id));
    frames.push_back(zmq::buffer(encoded));
    for (const auto& p : payload) frames.push_back(zmq::buffer(p));
    try {
      // dontwait: a client that stopped reading must not stall the service.
      if (!zmq::send_multipart(router_, frames, zmq::send_flags::dontwait)) {
        log_->warn("dropped a reply to '{}': its queue is full", routing_id);
      }
    } catch (const zmq::error_t& e) {
      // EHOSTUNREACH (ROUTER_MANDATORY): the client has gone; nothing to answer.
      log_->debug("dropped a reply to '{}': {}", routing_id, e.what());
    }
  }

  zmq::socket_t router_;
  zmq::socket_t control_;
  std::map<std::string, std::string> values_;
  std::vector<Parked> parked_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace

struct KvService::Impl {
  zmq::context_t context{1};  // declared first: destroyed after every socket below
  std::optional<JobKeys> keys;
  std::unique_ptr<detail::PeerGuard> guard;  // with keys; outlives the server thread's use of the socket
  std::shared_ptr<std::atomic<std::uint64_t>> refused = std::make_shared<std::atomic<std::uint64_t>>(0);
  zmq::socket_t control;  // the owner's end of the inproc control pair
  std::thread thread;
  std::string endpoint;
};

KvService::KvService(std::optional<JobKeys> keys) : impl_(std::make_unique<Impl>()) { impl_->keys = std::move(keys); }

KvService::~KvService() {
  try {
    stop();
  } catch (const std::exception& e) {
    logger("tenax.elastic")->error("stopping the rendezvous key-value service: {}", e.what());
  }
}

std::string KvService::start(const std::string& bind_endpoint) {
  if (impl_->thread.joinable()) {
    throw RendezvousError("the rendezvous key-value service already serves at " + impl_->endpoint);
  }
  static std::atomic<unsigned> instances{0};
  const std::string control_endpoint = "inproc://tenax-kv-control-" + std::to_string(instances++);

  zmq::socket_t router(impl_->context, zmq::socket_type::router);
  router.set(zmq::sockopt::linger, 0);
  router.set(zmq::sockopt::router_mandatory, true);
  if (impl_->keys)
    impl_->guard =
        std::make_unique<detail::PeerGuard>(impl_->context, router, *impl_->keys, "key-value store", impl_->refused);
  try {
    router.bind(bind_endpoint);
  } catch (const zmq::error_t& e) {
    impl_->guard.reset();
    throw RendezvousError("cannot bind the rendezvous key-value service to '" + bind_endpoint + "': " + e.what() +
                          "; choose a free port or another address");
  }
  std::string bound = router.get(zmq::sockopt::last_endpoint);

  zmq::socket_t server_control(impl_->context, zmq::socket_type::pair);
  server_control.set(zmq::sockopt::linger, 0);
  server_control.bind(control_endpoint);
  zmq::socket_t control(impl_->context, zmq::socket_type::pair);
  control.set(zmq::sockopt::linger, 0);
  control.connect(control_endpoint);

  // The sockets move to the service thread here and are used only there from now on
  // (thread creation is the memory barrier ZeroMQ asks for when a socket changes threads).
  auto server = std::make_unique<KvServer>(std::move(router), std::move(server_control));
  impl_->thread = std::thread([server = std::move(server)] { server->run(); });
  impl_->control = std::move(control);
  impl_->endpoint = bound;
  logger("tenax.elastic")
      ->info("rendezvous key-value service listening at {}{}", bound,
             impl_->keys ? " (CURVE: the job's keys only)" : " (no CURVE: anyone may connect)");
  return bound;
}

void KvService::stop() {
  if (!impl_->thread.joinable()) return;
  // If the send fails the service thread has already ended; join returns at once then.
  (void)impl_->control.send(zmq::str_buffer("STOP"), zmq::send_flags::dontwait);
  impl_->thread.join();
  impl_->control.close();
  impl_->guard.reset();
  impl_->endpoint.clear();
}

void KvService::drop_prefix(const std::string& prefix) {
  if (!impl_->thread.joinable()) return;
  std::vector<zmq::const_buffer> request{zmq::str_buffer("DROP"), zmq::buffer(prefix)};
  if (!zmq::send_multipart(impl_->control, request, zmq::send_flags::dontwait)) {
    throw RendezvousError("the rendezvous key-value service thread is not running; cannot drop '" + prefix + "'");
  }
  // The service answers between two requests; ten seconds means it is wedged.
  zmq::pollitem_t item{impl_->control.handle(), 0, ZMQ_POLLIN, 0};
  zmq::poll(&item, 1, std::chrono::seconds(10));
  zmq::message_t ack;
  if (!(item.revents & ZMQ_POLLIN) || !impl_->control.recv(ack, zmq::recv_flags::dontwait)) {
    throw RendezvousError("the rendezvous key-value service did not confirm dropping '" + prefix + "' within 10 s");
  }
}

std::string KvService::endpoint() const { return impl_->endpoint; }

std::uint64_t KvService::refused_peers() const { return impl_->refused->load(); }

}  // namespace tenax::elastic
