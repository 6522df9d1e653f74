// A ZeroMQ TCP endpoint, "tcp://HOST:PORT": assembled and split here, nowhere else.
// HOST may be a name, an IPv4 address, "*" (bind every interface) or a bracketed IPv6 address;
// PORT 0 asks a bind for any free port.
// Thread-safety: a plain value.
//
//   const tenax::Endpoint bound = tenax::Endpoint::parse(service.start("tcp://*:0"));
//   client.connect(bound.with_host("node2").str());   // "tcp://node2:41234"
#pragma once

#include <string>

namespace tenax {

struct Endpoint {
  std::string host;
  int port = 0;

  /// "tcp://HOST:PORT" or "HOST:PORT". Throws ConfigError, naming `text`, when there is no host
  /// or no port in 1..65535 (0 too when `allow_any_port`).
  static Endpoint parse(const std::string& text, bool allow_any_port = false);

  /// "tcp://HOST:PORT".
  std::string str() const;
  /// "HOST:PORT", as users write it on command lines.
  std::string host_port() const;
  Endpoint with_host(std::string other) const { return {std::move(other), port}; }
  Endpoint with_port(int other) const { return {host, other}; }
  /// A wildcard bind address ("*", "0.0.0.0", "[::]"): reachable only at some other name.
  bool wildcard() const;

  bool operator==(const Endpoint& other) const { return host == other.host && port == other.port; }
};

}  // namespace tenax
