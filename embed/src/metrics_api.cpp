// Metrics: the solver's own values into the run's JSONL / TensorBoard sinks.
#include "error_boundary.h"
#include "handles.h"
#include "live_handles.h"

using tenax::capi::guarded;
using tenax::capi::InvalidArgument;
using tenax::capi::live;

extern "C" {

tenax_status tenax_log_metrics(tenax_trainer* trainer, int64_t step, const char* const* names, const double* values,
                               int32_t n) {
  return guarded("tenax_log_metrics", [&] {
    tenax_trainer& t = live(trainer, "trainer", "tenax_trainer");
    if (n < 0) throw InvalidArgument("n: " + std::to_string(n) + " is negative");
    if (n > 0 && names == nullptr) throw InvalidArgument("names: NULL with n > 0");
    if (n > 0 && values == nullptr) throw InvalidArgument("values: NULL with n > 0");
    tenax::sdk::Logs logs;
    for (int32_t i = 0; i < n; ++i) {
      const std::string where = "names[" + std::to_string(i) + "]";
      if (names[i] == nullptr || names[i][0] == '\0') throw InvalidArgument(where + ": NULL or empty name");
      if (!logs.emplace(names[i], values[i]).second) {
        throw InvalidArgument(where + ": '" + std::string(names[i]) + "' appears twice in this call");
      }
    }
    if (logs.empty()) return;
    t.trainer->log(logs, step);  // recorded at the solver's step
  });
}

}  // extern "C"
