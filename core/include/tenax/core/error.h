// The exception tree thrown by Tenax's public API.
//
// Messages say what went wrong, where (key, file, rank) and what to do about it.
// Thread-safety: exceptions are values; safe to copy across threads.
//
//   try { trainer.train(); }
//   catch (const tenax::ConfigError& e) { std::cerr << e.what(); return 2; }
#pragma once

#include <stdexcept>
#include <string>

namespace tenax {

/// Base of every exception Tenax throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

/// A configuration value, CLI flag or environment variable is missing or invalid (exit code 2).
class ConfigError : public Error {
 public:
  using Error::Error;
};

/// A checkpoint or model file could not be written, read or verified.
class StorageError : public Error {
 public:
  using Error::Error;
};

/// Rendezvous or key-value store failure.
class RendezvousError : public Error {
 public:
  using Error::Error;
};

/// A peer rank or node stopped answering; the generation must be rebuilt.
class PeerLostError : public Error {
 public:
  using Error::Error;
};

/// A blocking call passed its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

}  // namespace tenax
