#include "shutdown_signals.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"

namespace tenax::launcher {
namespace {

// Async-signal-safe state shared with the handler. Process-wide by nature: so are signals.
volatile std::sig_atomic_t g_first_signal = 0;
volatile std::sig_atomic_t g_signal_count = 0;
volatile std::sig_atomic_t g_write_fd = -1;
bool g_instance_alive = false;

extern "C" void on_shutdown_signal(int signal) {
  const int saved_errno = errno;
  if (g_first_signal == 0) g_first_signal = signal;
  g_signal_count = g_signal_count + 1;
  const char byte = 1;
  if (g_write_fd >= 0) {
    [[maybe_unused]] ssize_t n = ::write(g_write_fd, &byte, 1);  // full pipe: already woken
  }
  errno = saved_errno;
}

}  // namespace

ShutdownSignals::ShutdownSignals() {
  if (g_instance_alive) throw Error("ShutdownSignals: only one instance may exist at a time");
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw Error(std::string("cannot create the signal pipe: ") + std::strerror(errno));
  }
  read_fd_.reset(fds[0]);
  write_fd_.reset(fds[1]);
  g_first_signal = 0;
  g_signal_count = 0;
  g_write_fd = write_fd_.get();
  g_instance_alive = true;

  struct sigaction action {};
  action.sa_handler = on_shutdown_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, &old_int_);
  ::sigaction(SIGTERM, &action, &old_term_);
  ::sigaction(SIGUSR1, &action, &old_usr1_);
}

ShutdownSignals::~ShutdownSignals() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGUSR1, &old_usr1_, nullptr);
  g_write_fd = -1;
  read_fd_.reset();
  write_fd_.reset();
  g_instance_alive = false;
}

int ShutdownSignals::wait(std::chrono::milliseconds timeout) {
  // Always sleeps on the pipe (never returns early just because a signal came before), so the
  // stop sequence can use wait() as its sleep after the first signal; a new signal still wakes it.
  pollfd pfd{read_fd_.get(), POLLIN, 0};
  int rc = ::poll(&pfd, 1, static_cast<int>(timeout.count()));
  if (rc > 0) {
    char buffer[64];
    while (::read(read_fd_.get(), buffer, sizeof buffer) > 0) {
    }
  }
  return g_first_signal;
}

int ShutdownSignals::count() const { return g_signal_count; }

int ShutdownSignals::received() const { return g_first_signal; }

}  // namespace tenax::launcher
