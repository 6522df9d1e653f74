#include "live_handles.h"

#include <mutex>
#include <unordered_set>

namespace tenax::capi {
namespace {

// A function-local static: the registry exists before the first handle whatever the order of
// static initialisation in the program that loads libtenax.
struct Registry {
  std::mutex mutex;
  std::unordered_set<const void*> handles;
};

Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void remember_handle(const void* handle) {
  std::lock_guard lock(registry().mutex);
  registry().handles.insert(handle);
}

void forget_handle(const void* handle) {
  std::lock_guard lock(registry().mutex);
  registry().handles.erase(handle);
}

bool is_live_handle(const void* handle) {
  std::lock_guard lock(registry().mutex);
  return registry().handles.count(handle) != 0;
}

}  // namespace tenax::capi
