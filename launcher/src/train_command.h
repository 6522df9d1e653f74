// `tenax train ...`: runs the trainer program, tenax-train, in this process (exec), so that
// `tenax run -- tenax train job.toml` supervises, signals and kills the trainer itself by the
// pid it started. The launcher stays free of libtorch; tenax-train is installed beside it.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tenax::launcher {

/// Where tenax-train is for a `tenax` at `tenax_path`: beside it (installed), else the build
/// tree's train/ beside launcher/. Empty when neither exists.
std::filesystem::path find_train_program(const std::filesystem::path& tenax_path);

/// Replaces this process by tenax-train with `args`; returns (exit 2, the reason printed) only
/// when the program is missing or cannot be started.
int exec_train_command(const std::vector<std::string>& args);

}  // namespace tenax::launcher
