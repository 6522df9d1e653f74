#include "tenax/core/logging.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <utility>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace tenax {
namespace {

// Logging configuration is process-wide by nature (one stderr); it holds no distributed state.
struct Registry {
  std::mutex mutex;
  LogIdentity identity;
  std::shared_ptr<spdlog::sinks::sink> sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  std::map<std::pair<std::string, LogPolicy>, std::shared_ptr<spdlog::logger>> loggers;
};

Registry& registry() {
  static Registry r;
  return r;
}

std::string pattern_for(const LogIdentity& id) {
  std::string who = id.rank >= 0 ? id.role + " r" + std::to_string(id.rank) : id.role;
  return "[%H:%M:%S.%e] [" + who + " g" + std::to_string(id.generation) + "] [%n] %^%l%$: %v";
}

spdlog::level::level_enum level_from_env() {
  const char* v = std::getenv("TENAX_LOG_LEVEL");
  if (!v) return spdlog::level::info;
  auto level = spdlog::level::from_str(v);
  return level == spdlog::level::off && std::string(v) != "off" ? spdlog::level::info : level;
}

spdlog::level::level_enum level_for(const LogIdentity& id, LogPolicy policy) {
  const bool quiet = policy == LogPolicy::kRankZeroOnly && id.rank > 0;
  return quiet ? spdlog::level::warn : level_from_env();
}

}  // namespace

void set_log_identity(const LogIdentity& identity) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.identity = identity;
  const std::string pattern = pattern_for(identity);
  for (auto& [key, l] : r.loggers) {
    l->set_pattern(pattern);
    l->set_level(level_for(identity, key.second));
  }
}

std::shared_ptr<spdlog::logger> logger(const std::string& component, LogPolicy policy) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  auto& slot = r.loggers[{component, policy}];
  if (!slot) {
    slot = std::make_shared<spdlog::logger>(component, r.sink);
    slot->set_pattern(pattern_for(r.identity));
    slot->set_level(level_for(r.identity, policy));
    slot->flush_on(spdlog::level::info);
  }
  return slot;
}

}  // namespace tenax
