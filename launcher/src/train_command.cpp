#include "train_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "tenax/core/exit_codes.h"

namespace tenax::launcher {

std::filesystem::path find_train_program(const std::filesystem::path& tenax_path) {
  const std::filesystem::path dir = tenax_path.parent_path();
  for (const auto& candidate : {dir / "tenax-train", dir.parent_path() / "train" / "tenax-train"}) {
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

int exec_train_command(const std::vector<std::string>& args) {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path program = ec ? std::filesystem::path() : find_train_program(self);
  if (program.empty()) {
    std::cerr << "tenax train: the trainer program tenax-train is not installed beside " << self.string()
              << "; build and install it with tenax (cmake --build BUILD --target tenax_train)\n";
    return kExitUsage;
  }
  std::vector<std::string> words{program.string()};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  ::execv(program.c_str(), argv.data());
  std::cerr << "tenax train: cannot start " << program.string() << ": " << std::strerror(errno) << "\n";
  return kExitUsage;
}

}  // namespace tenax::launcher
