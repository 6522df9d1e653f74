#include "peer_guard.h"

#include <array>
#include <cstdio>
#include <cstring>
#include <utility>
#include <vector>

#include <zmq_addon.hpp>

#include "tenax/core/error.h"
#include "tenax/core/logging.h"

namespace tenax::elastic::detail {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";
constexpr int kHandshakeEvents = ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
// A port scanner or a misconfigured job can knock thousands of times: log the first ones, then
// one line per kLogEvery with the running count.
constexpr std::uint64_t kLogFirst = 20;
constexpr std::uint64_t kLogEvery = 1000;

std::string as_string(const zmq::message_t& m) { return std::string(static_cast<const char*>(m.data()), m.size()); }

std::string protocol_error_text(std::uint32_t code) {
  switch (code) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
      return "it does not use CURVE (a client without the job's key file)";
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
      return "its CURVE handshake does not decrypt (it encrypts to another server key: another job's key file)";
    default: {
      char hex[16];
      std::snprintf(hex, sizeof hex, "0x%08x", code);
      return std::string("its handshake broke the ZMTP/CURVE protocol (ZeroMQ protocol error ") + hex + ")";
    }
  }
}

// Owns the ZAP REP socket, the monitor PAIR and the control PAIR; runs on the guard's thread.
class GuardThread {
 public:
  GuardThread(zmq::socket_t zap, zmq::socket_t monitor, zmq::socket_t control, std::string allowed_client_key,
              std::string service, std::shared_ptr<std::atomic<std::uint64_t>> refused)
      : zap_(std::move(zap)),
        monitor_(std::move(monitor)),
        control_(std::move(control)),
        allowed_(std::move(allowed_client_key)),
        service_(std::move(service)),
        refused_(std::move(refused)),
        log_(logger("tenax.elastic")) {}

  void run() {
    try {
      serve();
    } catch (const std::exception& e) {
      log_->error("{}: the peer guard stopped on an internal error: {}; new connections will hang", service_, e.what());
    }
  }

 private:
  void serve() {
    while (true) {
      zmq::pollitem_t items[] = {{zap_.handle(), 0, ZMQ_POLLIN, 0},
                                 {monitor_.handle(), 0, ZMQ_POLLIN, 0},
                                 {control_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 3, std::chrono::milliseconds(-1));
      if (items[2].revents & ZMQ_POLLIN) return;  // STOP
      if (items[0].revents & ZMQ_POLLIN) answer_zap();
      if (items[1].revents & ZMQ_POLLIN) read_monitor_event();
    }
  }

  // ZAP (RFC 27): version, request id, domain, address, routing id, mechanism, credentials.
  void answer_zap() {
    std::vector<zmq::message_t> request;
    if (!zmq::recv_multipart(zap_, std::back_inserter(request), zmq::recv_flags::dontwait)) return;
    if (request.size() < 6) return;  // REP needs an answer only to a well-formed request
    const std::string request_id = as_string(request[1]);
    const std::string address = as_string(request[3]);
    const std::string mechanism = as_string(request[5]);
    std::string client_key;
    if (mechanism == "CURVE" && request.size() >= 7 && request[6].size() == 32) {
      char z85[41] = {};
      if (zmq_z85_encode(z85, static_cast<const std::uint8_t*>(request[6].data()), 32) != nullptr) client_key = z85;
    }
    const bool admitted = !client_key.empty() && client_key == allowed_;
    if (!admitted) {
      refuse(address.empty() ? "a peer" : "a peer at " + address,
             mechanism != "CURVE" ? "it does not use CURVE"
                                  : "its CURVE key " + client_key + " is not this job's client key");
    }
    std::array<std::string, 6> reply = {
        "1.0", request_id, admitted ? "200" : "400", admitted ? "OK" : "not this job's key", "", ""};
    std::vector<zmq::const_buffer> buffers;
    for (const auto& part : reply) buffers.push_back(zmq::buffer(part));
    (void)zmq::send_multipart(zap_, buffers, zmq::send_flags::dontwait);
  }

  // Monitor events: 6 bytes (uint16 event, uint32 value), then the endpoint.
  void read_monitor_event() {
    std::vector<zmq::message_t> event;
    if (!zmq::recv_multipart(monitor_, std::back_inserter(event), zmq::recv_flags::dontwait)) return;
    if (event.empty() || event[0].size() < 6) return;
    std::uint16_t id = 0;
    std::uint32_t value = 0;
    std::memcpy(&id, event[0].data(), sizeof id);
    std::memcpy(&value, static_cast<const char*>(event[0].data()) + sizeof id, sizeof value);
    if (id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) {
      refuse("a connection", protocol_error_text(value));
    } else if (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      // A peer without CURVE sees the mechanism mismatch as early as the service does; when it
      // hangs up first, this side only sees the connection drop mid-handshake. The job's own
      // agents and workers complete their handshakes (they never close a socket mid-way except
      // when they die), so this is counted, and worded for what it may be.
      refuse("a connection", "it broke off during the CURVE handshake (" +
                                 std::string(zmq_strerror(static_cast<int>(value))) +
                                 "): a client without this job's keys, or one that died while connecting");
    }
  }

  void refuse(const std::string& who, const std::string& why) {
    const std::uint64_t count = ++*refused_;
    if (count <= kLogFirst || count % kLogEvery == 0) {
      log_->warn(
          "{}: refused {}: {}. Only the job's agents and workers, holding its key file, may connect "
          "({} refused so far{})",
          service_, who, why, count, count == kLogFirst ? "; from now on one line per 1000" : "");
    }
  }

  zmq::socket_t zap_;
  zmq::socket_t monitor_;
  zmq::socket_t control_;
  const std::string allowed_;
  const std::string service_;
  std::shared_ptr<std::atomic<std::uint64_t>> refused_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace

void make_curve_client(zmq::socket_t& socket, const JobKeys& keys) {
  socket.set(zmq::sockopt::curve_serverkey, keys.server_public);
  socket.set(zmq::sockopt::curve_publickey, keys.client_public);
  socket.set(zmq::sockopt::curve_secretkey, keys.client_secret);
}

PeerGuard::PeerGuard(zmq::context_t& context, zmq::socket_t& server_socket, const JobKeys& keys, std::string service,
                     std::shared_ptr<std::atomic<std::uint64_t>> refused) {
  server_socket.set(zmq::sockopt::curve_server, true);
  server_socket.set(zmq::sockopt::curve_secretkey, keys.server_secret);
  server_socket.set(zmq::sockopt::zap_domain, "tenax");

  static std::atomic<unsigned> instances{0};
  const std::string suffix = std::to_string(instances++);

  zmq::socket_t zap(context, zmq::socket_type::rep);
  zap.set(zmq::sockopt::linger, 0);
  try {
    zap.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    throw RendezvousError(service + ": cannot bind the ZAP handler (" + e.what() +
                          "): one PeerGuard per ZeroMQ context");
  }
  const std::string monitor_endpoint = "inproc://tenax-peer-guard-monitor-" + suffix;
  if (zmq_socket_monitor(server_socket.handle(), monitor_endpoint.c_str(), kHandshakeEvents) != 0) {
    throw RendezvousError(service + ": cannot monitor its socket: " + zmq_strerror(zmq_errno()));
  }
  zmq::socket_t monitor(context, zmq::socket_type::pair);
  monitor.set(zmq::sockopt::linger, 0);
  monitor.connect(monitor_endpoint);

  const std::string control_endpoint = "inproc://tenax-peer-guard-control-" + suffix;
  zmq::socket_t thread_control(context, zmq::socket_type::pair);
  thread_control.set(zmq::sockopt::linger, 0);
  thread_control.bind(control_endpoint);
  control_ = zmq::socket_t(context, zmq::socket_type::pair);
  control_.set(zmq::sockopt::linger, 0);
  control_.connect(control_endpoint);

  auto guard = std::make_unique<GuardThread>(std::move(zap), std::move(monitor), std::move(thread_control),
                                             keys.client_public, std::move(service), std::move(refused));
  thread_ = std::thread([guard = std::move(guard)] { guard->run(); });
}

PeerGuard::~PeerGuard() {
  if (!thread_.joinable()) return;
  // If the send fails the thread has already ended; join returns at once then.
  (void)control_.send(zmq::str_buffer("STOP"), zmq::send_flags::dontwait);
  thread_.join();
}

}  // namespace tenax::elastic::detail
