#include "tenax/sdk/preemption.h"

#include <csignal>
#include <mutex>

namespace tenax::sdk {
namespace {

// Shared with the handler, hence process-wide: so are signal dispositions.
volatile std::sig_atomic_t g_requested = 0;

std::mutex g_mutex;
int g_instances = 0;
struct sigaction g_old_term {};
struct sigaction g_old_usr1 {};

extern "C" void on_preemption_signal(int signal) {
  if (g_requested == 0) g_requested = signal;
}

}  // namespace

PreemptionSignals::PreemptionSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_instances++ > 0) return;
  g_requested = 0;
  struct sigaction action {};
  action.sa_handler = on_preemption_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGTERM, &action, &g_old_term);
  ::sigaction(SIGUSR1, &action, &g_old_usr1);
}

PreemptionSignals::~PreemptionSignals() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_instances > 0) return;
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaction(SIGUSR1, &g_old_usr1, nullptr);
  g_requested = 0;
}

int PreemptionSignals::requested() const { return g_requested; }

}  // namespace tenax::sdk
