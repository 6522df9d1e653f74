#include "crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <array>
#include <cstdint>

namespace tenax::launcher {
namespace {

std::string_view g_program = "tenax";

constexpr std::array<int, 5> kFatalSignals = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};

const char* fatal_signal_name(int sig) {
  switch (sig) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGABRT: return "SIGABRT";
    default: return "a fatal signal";
  }
}

void put(const char* text, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, size);
    if (n <= 0) return;
    text += n;
    size -= static_cast<std::size_t>(n);
  }
}

void put(std::string_view text) { put(text.data(), text.size()); }

// Decimal without the allocator (snprintf is not async-signal-safe).
void put_number(long value) {
  char digits[24];
  std::size_t n = 0;
  const bool negative = value < 0;
  unsigned long v = negative ? 0UL - static_cast<unsigned long>(value) : static_cast<unsigned long>(value);
  do {
    digits[sizeof digits - 1 - n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof digits - 1);
  if (negative) digits[sizeof digits - 1 - n++] = '-';
  put(digits + sizeof digits - n, n);
}

void on_fatal_signal(int sig, siginfo_t* info, void* /*context*/) {
  put("\n");
  put(g_program);
  put(" (pid ");
  put_number(static_cast<long>(::getpid()));
  put("): fatal signal ");
  put(fatal_signal_name(sig));
  const bool sent = info && info->si_code <= 0 && info->si_pid != ::getpid();
  if (!sent && info && (sig == SIGSEGV || sig == SIGBUS)) {
    put(" at address 0x");
    char hex[2 * sizeof(void*)];
    auto address = reinterpret_cast<std::uintptr_t>(info->si_addr);
    for (std::size_t i = 0; i < sizeof hex; ++i) {
      hex[sizeof hex - 1 - i] = "0123456789abcdef"[address & 0xf];
      address >>= 4;
    }
    put(hex, sizeof hex);
  }
  if (sent) {
    put(" sent by pid ");
    put_number(static_cast<long>(info->si_pid));
    put(" (a kill from outside, not a fault of this process)\n");
  } else {
    put("; this is a bug in tenax, please report it with the lines below (addr2line -e <binary> turns "
        "the +0x offsets into source lines)\n");
  }
  void* frames[64];
  const int depth = ::backtrace(frames, static_cast<int>(sizeof frames / sizeof frames[0]));
  ::backtrace_symbols_fd(frames, depth, STDERR_FILENO);
  // SA_RESETHAND restored the default action: the re-raised signal ends the process as it
  // would have without this handler (exit status 128 + signal, a core dump where enabled).
  ::raise(sig);
}

}  // namespace

void install_crash_report(std::string_view program) {
  g_program = program;
  // backtrace() loads libgcc on its first call, which allocates: do that now, not in the handler.
  void* warm[1];
  (void)::backtrace(warm, 1);
  // Its own stack, so that a stack overflow is reported and not turned into a second fault.
  static std::array<char, 64 * 1024> alternate_stack;
  stack_t stack{};
  stack.ss_sp = alternate_stack.data();
  stack.ss_size = alternate_stack.size();
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND | SA_NODEFER;
  ::sigemptyset(&action.sa_mask);
  for (int sig : kFatalSignals) ::sigaction(sig, &action, nullptr);
}

}  // namespace tenax::launcher
