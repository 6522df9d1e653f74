#include "tenax/elastic/job_keys.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "tenax/core/error.h"
#include "tenax/core/unique_fd.h"

namespace tenax::elastic {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t kZ85KeyLength = 40;
constexpr const char* kHeader =
    "# Tenax job keys (ZeroMQ CURVE, Z85). Private: anyone who reads this can join the job.\n";
constexpr std::array<const char*, 4> kNames = {"server_public", "server_secret", "client_public", "client_secret"};

std::string errno_text() { return std::strerror(errno); }

std::array<std::string, 2> key_pair() {
  char public_key[kZ85KeyLength + 1] = {};
  char secret_key[kZ85KeyLength + 1] = {};
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    throw ConfigError(std::string("cannot generate CURVE keys: ") + zmq_strerror(zmq_errno()) +
                      " (this libzmq was built without CURVE; Debian's libzmq5 has it)");
  }
  return {public_key, secret_key};
}

// Each key is 40 Z85 characters that decode to 32 bytes.
void check_key(const fs::path& file, const std::string& name, const std::string& value) {
  std::array<std::uint8_t, 32> decoded{};
  if (value.size() != kZ85KeyLength || zmq_z85_decode(decoded.data(), value.c_str()) == nullptr) {
    throw ConfigError("key file " + file.string() + ": '" + name + "' is not a 40-character Z85 CURVE key; " +
                      "delete the file to have the job write a new one");
  }
}

void check_pair(const fs::path& file, const std::string& which, const std::string& public_key,
                const std::string& secret_key) {
  char derived[kZ85KeyLength + 1] = {};
  if (zmq_curve_public(derived, secret_key.c_str()) != 0 || public_key != derived) {
    throw ConfigError("key file " + file.string() + ": '" + which + "_public' is not the public key of '" + which +
                      "_secret'; delete the file to have the job write a new one");
  }
}

std::string file_text(const JobKeys& keys) {
  std::ostringstream out;
  out << kHeader << "server_public " << keys.server_public << "\nserver_secret " << keys.server_secret
      << "\nclient_public " << keys.client_public << "\nclient_secret " << keys.client_secret << "\n";
  return out.str();
}

}  // namespace

JobKeys JobKeys::generate() {
  const auto server = key_pair();
  const auto client = key_pair();
  return JobKeys{server[0], server[1], client[0], client[1]};
}

JobKeys read_job_keys(const fs::path& file) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) {
    throw ConfigError("cannot read the job's key file " + file.string() + ": " + errno_text() +
                      " (tenax run writes it into the run directory; pass --keys-file to use another)");
  }
  if (!S_ISREG(st.st_mode)) throw ConfigError("the job's key file " + file.string() + " is not a regular file");
  if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw ConfigError("the job's key file " + file.string() + " has mode " + mode +
                      ": others could read its secret keys and join the job; run `chmod 600 " + file.string() +
                      "` (or delete it to have the job write a new one)");
  }
  std::ifstream in(file);
  if (!in) throw ConfigError("cannot open the job's key file " + file.string() + ": " + errno_text());
  std::map<std::string, std::string> values;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line.rfind("# ", 0) == 0 || line == "#") continue;
    const auto space = line.find(' ');
    const std::string name = line.substr(0, space);
    const bool known = std::find(kNames.begin(), kNames.end(), name) != kNames.end();
    if (space == std::string::npos || !known) {
      throw ConfigError("key file " + file.string() + " line " + std::to_string(number) +
                        ": expected '<name> <key>' with a name among server_public, server_secret, "
                        "client_public, client_secret");
    }
    if (!values.emplace(name, line.substr(space + 1)).second) {
      throw ConfigError("key file " + file.string() + " line " + std::to_string(number) + ": '" + name +
                        "' appears twice");
    }
  }
  for (const char* name : kNames) {
    const auto it = values.find(name);
    if (it == values.end()) throw ConfigError("key file " + file.string() + " has no '" + name + "'");
    check_key(file, name, it->second);
  }
  JobKeys keys{values["server_public"], values["server_secret"], values["client_public"], values["client_secret"]};
  check_pair(file, "server", keys.server_public, keys.server_secret);
  check_pair(file, "client", keys.client_public, keys.client_secret);
  return keys;
}

JobKeys write_job_keys_if_absent(const fs::path& file, const JobKeys& keys) {
  std::error_code ec;
  if (fs::exists(file, ec)) return read_job_keys(file);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  fs::create_directories(dir, ec);
  if (ec) throw ConfigError("cannot create " + dir.string() + " for the job's key file: " + ec.message());

  // Written whole under a temporary name, then linked: link() fails if another agent got there
  // first, so every node ends up with the same keys and nobody reads half a file.
  const fs::path temporary = dir / (".tmp-" + file.filename().string() + "-" + std::to_string(::getpid()));
  const std::string text = file_text(keys);
  UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) throw ConfigError("cannot write the job's key file " + temporary.string() + ": " + errno_text());
  const bool written = ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
                       ::fchmod(fd.get(), 0600) == 0 && ::fsync(fd.get()) == 0;
  const std::string write_error = errno_text();
  fd.reset();
  if (!written) {
    ::unlink(temporary.c_str());
    throw ConfigError("cannot write the job's key file " + temporary.string() + ": " + write_error);
  }
  const bool linked = ::link(temporary.c_str(), file.c_str()) == 0;
  const int link_errno = errno;
  ::unlink(temporary.c_str());
  if (!linked && link_errno != EEXIST) {
    throw ConfigError("cannot create the job's key file " + file.string() + ": " + std::strerror(link_errno));
  }
  return read_job_keys(file);
}

JobKeys create_or_read_job_keys(const fs::path& file) { return write_job_keys_if_absent(file, JobKeys::generate()); }

JobKeys wait_for_job_keys(const fs::path& file, std::chrono::milliseconds timeout,
                          const std::function<void(std::chrono::seconds)>& still_waiting) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  auto next_note = start + std::chrono::seconds(5);
  std::error_code ec;
  while (!fs::exists(file, ec)) {
    const auto now = Clock::now();
    if (now - start >= timeout) {
      throw ConfigError("the job's key file " + file.string() + " did not appear within " +
                        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(timeout).count()) +
                        " s; the agent that hosts the rendezvous writes it, so every node must see it: put the "
                        "run directory (or --keys-file) on a shared file system, or copy the file there first");
    }
    if (now >= next_note) {
      if (still_waiting) still_waiting(std::chrono::duration_cast<std::chrono::seconds>(now - start));
      next_note = now + std::chrono::seconds(5);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return read_job_keys(file);
}

}  // namespace tenax::elastic
