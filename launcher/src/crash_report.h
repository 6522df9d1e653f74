// A `tenax` process that crashes (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) says so on stderr
// before it dies: which signal, its pid, and a raw backtrace of the faulting thread. Without
// it, an agent that crashed at 3 a.m. leaves only an exit status of 139 and a log that simply
// stops; with it, the log names the fault and where it happened.
//
// The handler uses only async-signal-safe calls (write, backtrace_symbols_fd after backtrace
// was warmed up at install time), runs on its own stack so that a stack overflow is reported
// too, then restores the default action and re-raises: the exit status and any core dump are
// the same as without it.
#pragma once

#include <string_view>

namespace tenax::launcher {

/// Installs the handler for this process; `program` names it in the report ("tenax run").
/// Call once, early in main. The string must outlive the process (a literal).
void install_crash_report(std::string_view program);

}  // namespace tenax::launcher
