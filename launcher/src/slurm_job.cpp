#include "slurm_job.h"

#include <cstdlib>
#include <limits>

#include "tenax/core/error.h"

namespace tenax::launcher {
namespace {

constexpr std::size_t kMaxHosts = 100000;

[[noreturn]] void list_error(const std::string& list, std::size_t pos, const std::string& what) {
  throw ConfigError("SLURM_JOB_NODELIST='" + list + "': " + what + " at position " + std::to_string(pos) +
                    "; expected e.g. node[01-03,7],gpu1");
}

bool all_digits(const std::string& s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos; }

// "01-03,7" → {"01","02","03","7"}.
std::vector<std::string> expand_ranges(const std::string& list, const std::string& body, std::size_t pos) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= body.size()) {
    const auto comma = body.find(',', start);
    const std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const auto dash = item.find('-');
    const std::string lo = item.substr(0, dash);
    const std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi) || lo.size() > 9 || hi.size() > 9) {
      list_error(list, pos + start, "'" + item + "' in brackets is not a number or a range A-B");
    }
    const long a = std::stol(lo);
    const long b = std::stol(hi);
    if (b < a) list_error(list, pos + start, "range '" + item + "' goes down");
    if (static_cast<std::size_t>(b - a) >= kMaxHosts)
      list_error(list, pos + start, "range '" + item + "' is too large");
    for (long v = a; v <= b; ++v) {
      std::string digits = std::to_string(v);
      if (digits.size() < lo.size()) digits.insert(0, lo.size() - digits.size(), '0');
      out.push_back(std::move(digits));
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// One host pattern without top-level commas: "gpu-a[1-2]x", "r[1-2]n[3,5]".
void expand_host(const std::string& list, const std::string& pattern, std::size_t pos, std::vector<std::string>& out) {
  std::vector<std::string> partial{""};
  std::size_t i = 0;
  while (i < pattern.size()) {
    const auto open = pattern.find('[', i);
    const std::string literal = pattern.substr(i, open == std::string::npos ? std::string::npos : open - i);
    if (literal.find(']') != std::string::npos) list_error(list, pos + i + literal.find(']'), "']' without '['");
    for (auto& p : partial) p += literal;
    if (open == std::string::npos) break;
    const auto close = pattern.find(']', open);
    if (close == std::string::npos) list_error(list, pos + open, "'[' without ']'");
    const std::string body = pattern.substr(open + 1, close - open - 1);
    if (body.find('[') != std::string::npos) list_error(list, pos + open, "nested '['");
    const auto values = expand_ranges(list, body, pos + open + 1);
    if (partial.size() * values.size() > kMaxHosts) list_error(list, pos + open, "more than 100000 hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * values.size());
    for (const auto& p : partial) {
      for (const auto& v : values) next.push_back(p + v);
    }
    partial = std::move(next);
    i = close + 1;
  }
  for (auto& p : partial) out.push_back(std::move(p));
  if (out.size() > kMaxHosts) list_error(list, pos, "more than 100000 hosts");
}

int env_int(const EnvLookup& env, const std::string& name, int min) {
  const auto value = env(name);
  if (!value) throw ConfigError(name + " is not set (expected under srun)");
  if (!all_digits(*value) || value->size() > 9 || std::stoi(*value) < min) {
    throw ConfigError(name + "='" + *value + "' is not a whole number >= " + std::to_string(min));
  }
  return std::stoi(*value);
}

}  // namespace

std::optional<std::string> process_env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

std::vector<std::string> expand_nodelist(const std::string& list) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    const char c = i < list.size() ? list[i] : ',';
    if (c == '[') {
      if (++depth > 1) list_error(list, i, "nested '['");
    } else if (c == ']') {
      if (--depth < 0) list_error(list, i, "']' without '['");
    } else if (c == ',' && depth == 0) {
      const std::string host = list.substr(start, i - start);
      if (host.empty()) list_error(list, start, "empty host name");
      if (host.front() == '[') list_error(list, start, "a host name cannot start with '['");
      expand_host(list, host, start, out);
      start = i + 1;
    } else if (c == ' ' || c == '\t') {
      list_error(list, i, "a space");
    }
  }
  if (depth != 0) list_error(list, list.size(), "'[' without ']'");
  return out;
}

std::optional<SlurmJob> slurm_job_from_env(const EnvLookup& env) {
  const auto job_id = env("SLURM_JOB_ID");
  // SLURM_STEP_ID tells a task of srun from the batch shell (or an salloc shell), which also
  // has SLURM_NODEID=0 and SLURM_NNODES=N but is one process on the first node: an agent
  // started there is a single-node agent.
  if (!job_id || !env("SLURM_NODEID") || !env("SLURM_STEP_ID")) return std::nullopt;
  SlurmJob job;
  job.job_id = *job_id;
  job.node_id = env_int(env, "SLURM_NODEID", 0);
  job.num_nodes = env("SLURM_NNODES") ? env_int(env, "SLURM_NNODES", 1) : env_int(env, "SLURM_JOB_NUM_NODES", 1);
  job.proc_id = env("SLURM_PROCID") ? env_int(env, "SLURM_PROCID", 0) : 0;
  // SLURM_NODEID and SLURM_NNODES count the nodes of this step, so the hosts are the step's
  // (the job's when the step spans it, the usual case).
  const char* list_name = env("SLURM_STEP_NODELIST") ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const auto list = env(list_name);
  if (!list || list->empty()) throw ConfigError("SLURM_JOB_NODELIST is not set (expected under srun)");
  job.nodes = expand_nodelist(*list);
  if (job.node_id >= static_cast<int>(job.nodes.size())) {
    throw ConfigError("SLURM_NODEID=" + std::to_string(job.node_id) + " is outside " + list_name + "='" + *list +
                      "' (" + std::to_string(job.nodes.size()) + " host(s))");
  }
  if (env("SLURM_RESTART_COUNT")) job.restart_count = env_int(env, "SLURM_RESTART_COUNT", 0);
  job.node_name = env("SLURMD_NODENAME").value_or("");
  return job;
}

int rdzv_port_for_job(const std::string& job_id) {
  // A heterogeneous or array job id ("123_4", "123+1") keeps its leading number.
  const std::string digits = job_id.substr(0, job_id.find_first_not_of("0123456789"));
  if (digits.empty()) {
    throw ConfigError("SLURM_JOB_ID='" + job_id +
                      "' has no number to derive the rendezvous port from; pass "
                      "--rdzv-endpoint HOST:PORT");
  }
  const std::string tail = digits.size() > 6 ? digits.substr(digits.size() - 6) : digits;
  return kSlurmRdzvPortBase + static_cast<int>(std::stol(tail) % kSlurmRdzvPortSpan);
}

}  // namespace tenax::launcher
