// Rendezvous at scale (issue 15, point 5): one RendezvousService with CURVE on, in a child
// process of its own so that its CPU time is its own, and N agents against it: N
// RendezvousClients with node ids node-00000.., each with its own ZeroMQ context, socket and
// thread (as N agents on N machines have), driven by one thread each in this process. Default
// heartbeat (500 ms x 5) and last call (3 s); min_nodes N-1, max_nodes N (a job started with
// --nnodes N-1:N), so that the first generation forms when all N joined and the next one forms
// from the N-1 survivors of a death. One invocation measures one N once and prints one line,
// "RDZV_RESULT {json}"; bench/rendezvous_scale_bench.py runs the rounds and the table.
//
//   rendezvous_scale_bench --nodes N [--steady-s 10] [--seed S] [--service-log FILE] [--last-call-ms MS]
//
// Measured (all times on CLOCK_MONOTONIC, which the two processes share):
//   connect     constructing the N clients (each connects and starts its CURVE handshake); the
//               service's CPU until the joins start (the handshakes) is reported apart
//   form        first join() call -> every client holds its Assignment of generation 0
//   steady      a window of --steady-s in the formed generation: the service process's CPU time
//               (clock_getcpuclockid: every thread of it, the ZeroMQ I/O threads doing CURVE
//               included) / wall time, per thread from /proc/PID/task/*/stat; and the bytes on
//               the loopback interface (/proc/net/dev: every packet once, both directions,
//               TCP/IP headers and ACKs included), against a 1 s baseline taken before the
//               clients start (other processes' loopback traffic)
//   death       one client (chosen from --seed, at a random point of its heartbeat cycle) is
//               destroyed without leave(): the service sees
//               it only through missed heartbeats. detect = death -> first survivor sees
//               ABORTED; notified = death -> last survivor sees ABORTED (each then join()s
//               again); reform = death -> every survivor holds its generation-1 Assignment
//               (it includes the last-call window: N-1 < max_nodes)
// The checks that make the figures mean something: every client gets generation 0 with N
// nodes and distinct ranks, nobody's generation ends during the steady window (a false death),
// every survivor gets generation 1 with N-1 nodes and distinct ranks, the service lost exactly
// one node and refused nobody. A failed check exits 1 with the reason.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tenax/core/logging.h"
#include "tenax/core/status.h"
#include "tenax/core/unique_fd.h"
#include "tenax/elastic/job_keys.h"
#include "tenax/elastic/rendezvous.h"
#include "tenax/elastic/rendezvous_client.h"
#include "tenax/elastic/rendezvous_service.h"

namespace el = tenax::elastic;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Per client in this process: its context's mailbox, reaper (epoll + mailbox) and I/O thread
// (epoll + mailbox), the socket's mailbox, the TCP connection and the client's wake eventfd,
// with room to spare. Every client has its own context, so ZMQ_MAX_SOCKETS (1023 per context)
// is never approached; file descriptors and threads (4 per client: ZeroMQ's reaper and I/O, the
// client's, the driver's) are the limits.
constexpr int kFdsPerClient = 10;
constexpr milliseconds kJoinTimeout = std::chrono::seconds(120);
constexpr milliseconds kWatchSlice = std::chrono::seconds(1);  // how soon a driver sees `stop`
constexpr milliseconds kWaitLimit = std::chrono::seconds(120);

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "rendezvous_scale_bench: %s\n", message.c_str());
  std::fflush(nullptr);
  std::_Exit(1);
}

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

struct Args {
  int nodes = 64;
  double steady_s = 10;
  std::uint64_t seed = 1;
  std::string service_log;  // "": the service logs to this program's stderr
  std::optional<long> last_call_ms;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc)
      die("flag " + flag +
          " needs a value; usage: rendezvous_scale_bench --nodes N [--steady-s S] "
          "[--seed S] [--service-log FILE] [--last-call-ms MS]");
    const std::string value = argv[++i];
    try {
      if (flag == "--nodes") {
        a.nodes = std::stoi(value);
      } else if (flag == "--steady-s") {
        a.steady_s = std::stod(value);
      } else if (flag == "--seed") {
        a.seed = std::stoull(value);
      } else if (flag == "--service-log") {
        a.service_log = value;
      } else if (flag == "--last-call-ms") {
        a.last_call_ms = std::stol(value);
      } else {
        die("unknown flag " + flag);
      }
    } catch (const std::logic_error&) {
      die("flag " + flag + ": '" + value + "' is not a number");
    }
  }
  if (a.nodes < 2 || a.nodes > 4096) die("--nodes " + std::to_string(a.nodes) + " is not in 2..4096");
  if (a.steady_s <= 0) die("--steady-s must be > 0");
  return a;
}

void raise_fd_limit(int nodes) {
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0) die(std::string("getrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  r.rlim_cur = r.rlim_max;
  if (::setrlimit(RLIMIT_NOFILE, &r) != 0) die(std::string("setrlimit(RLIMIT_NOFILE): ") + std::strerror(errno));
  const rlim_t needed = static_cast<rlim_t>(nodes) * kFdsPerClient + 256;
  if (r.rlim_cur != RLIM_INFINITY && r.rlim_cur < needed) {
    die(std::to_string(nodes) + " clients need about " + std::to_string(needed) +
        " file descriptors; the hard limit (ulimit -Hn) is " + std::to_string(r.rlim_cur) +
        ": raise it or run fewer nodes");
  }
}

// --- the service's process, seen from here -------------------------------------------------

double process_cpu_s(pid_t pid) {
  clockid_t clock;
  if (::clock_getcpuclockid(pid, &clock) != 0) die("clock_getcpuclockid of the service process failed");
  timespec ts{};
  if (::clock_gettime(clock, &ts) != 0) die("clock_gettime of the service process's CPU clock failed");
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct ThreadTicks {
  std::string comm;
  long long ticks = 0;  // utime + stime, in clock ticks
};

// Every thread of `pid` by tid: its name and CPU ticks (/proc/PID/task/TID/stat).
std::map<int, ThreadTicks> thread_ticks(pid_t pid) {
  std::map<int, ThreadTicks> out;
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(tasks, ec)) {
    std::ifstream f(entry.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const auto open = line.find('(');
    const auto close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    std::vector<std::string> fields;  // from field 3 (state) on
    for (std::string field; rest >> field;) fields.push_back(field);
    if (fields.size() < 13) continue;
    ThreadTicks t;
    t.comm = line.substr(open + 1, close - open - 1);
    t.ticks = std::stoll(fields[11]) + std::stoll(fields[12]);  // fields 14 and 15: utime, stime
    out[std::stoi(entry.path().filename().string())] = t;
  }
  return out;
}

struct LoopbackCount {
  std::uint64_t bytes = 0;
  std::uint64_t packets = 0;
};

// The loopback interface's received bytes and packets: on lo every packet sent is received
// once, so this counts both directions of every connection once.
LoopbackCount loopback() {
  std::ifstream f("/proc/net/dev");
  for (std::string line; std::getline(f, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const auto name_start = line.find_first_not_of(' ');
    if (line.substr(name_start, colon - name_start) != "lo") continue;
    std::istringstream in(line.substr(colon + 1));
    LoopbackCount c;
    in >> c.bytes >> c.packets;
    return c;
  }
  die("no 'lo' line in /proc/net/dev");
}

double self_cpu_s() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

void write_line(int fd, const std::string& text) {
  const std::string line = text + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the other side is gone; it reports that itself
    done += static_cast<std::size_t>(n);
  }
}

// One line from `fd` (blocking); nullopt at end of file.
std::optional<std::string> read_line(int fd) {
  std::string line;
  char c = 0;
  while (true) {
    const ssize_t n = ::read(fd, &c, 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return line.empty() ? std::nullopt : std::optional<std::string>(line);
    if (c == '\n') return line;
    line += c;
  }
}

// The child: serves until the parent closes `in_fd`, then writes its snapshot's counters to
// `out_fd`. Never returns.
[[noreturn]] void serve(const Args& a, const el::JobKeys& keys, int in_fd, int out_fd) {
  if (!a.service_log.empty()) {
    const tenax::UniqueFd fd(::open(a.service_log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) die("cannot open --service-log " + a.service_log + ": " + std::strerror(errno));
    ::dup2(fd.get(), 2);
  }
  tenax::LogIdentity identity;
  identity.role = "rdzv";
  tenax::set_log_identity(identity);
  int code = 0;
  try {
    auto options = el::RendezvousOptions(a.nodes - 1, a.nodes).keys(keys);
    if (a.last_call_ms) options.last_call(milliseconds(*a.last_call_ms));
    el::RendezvousService service(options);
    write_line(out_fd, service.start("tcp://127.0.0.1:0"));
    while (read_line(in_fd)) {
    }
    const el::RendezvousSnapshot s = service.snapshot();
    std::ostringstream stats;
    stats << "{\"generation\": " << s.generation << ", \"members\": " << s.members.size()
          << ", \"live\": " << s.live.size() << ", \"nodes_lost\": " << s.nodes_lost
          << ", \"longest_silence_ms\": " << s.longest_silence_ms
          << ", \"malformed_messages\": " << s.malformed_messages << ", \"refused_peers\": " << s.refused_peers << "}";
    write_line(out_fd, stats.str());
    service.stop();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rendezvous_scale_bench: the service failed: %s\n", e.what());
    code = 1;
  }
  std::fflush(nullptr);
  std::_Exit(code);
}

// --- the agents ------------------------------------------------------------------------------

struct Agent {
  std::unique_ptr<el::RendezvousClient> client;
  std::thread thread;
  bool victim = false;
  Clock::time_point join_call{}, assigned{}, aborted{}, reassigned{};
  std::optional<el::Assignment> first, second;
};

struct Coordination {
  std::mutex mutex;
  std::condition_variable changed;
  bool go = false;
  bool stop = false;
  bool killed = false;
  int assigned = 0;
  int aborted = 0;
  int reassigned = 0;
  std::vector<std::string> errors;

  void fail(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex);
    errors.push_back(message);
    changed.notify_all();
  }
  void count(int& counter) {
    std::lock_guard<std::mutex> lock(mutex);
    ++counter;
    changed.notify_all();
  }
  bool stopping() {
    std::lock_guard<std::mutex> lock(mutex);
    return stop;
  }
  // Waits until `done()`; exits with the first error if one comes first or after kWaitLimit.
  template <class Done>
  void wait(const std::string& what, Done done) {
    std::unique_lock<std::mutex> lock(mutex);
    if (!changed.wait_for(lock, kWaitLimit, [&] { return done() || !errors.empty(); })) {
      errors.push_back(what + " did not happen within " + std::to_string(kWaitLimit.count()) + " ms");
    }
    if (!errors.empty()) {
      die(std::to_string(errors.size()) + " error(s) while waiting for " + what + "; the first: " + errors.front());
    }
  }
  // Exits with the first error, if any.
  void check(const std::string& when) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!errors.empty()) die(std::to_string(errors.size()) + " error(s) " + when + "; the first: " + errors.front());
  }
};

// One agent's life: join generation 0, stay in it until it ends (only the victim's death may
// end it), join generation 1, stay until told to stop. The victim's driver returns once it
// holds its assignment; main then destroys its client.
void drive(Agent& a, const std::string& node, Coordination& c) {
  {
    std::unique_lock<std::mutex> lock(c.mutex);
    c.changed.wait(lock, [&] { return c.go || c.stop; });
    if (c.stop) return;
  }
  a.join_call = Clock::now();
  auto first = a.client->join(kJoinTimeout);
  a.assigned = Clock::now();
  if (!first.is_ok()) return c.fail(node + ": first join failed: " + first.status().to_string());
  a.first = first.value();
  c.count(c.assigned);
  if (a.victim) return;
  tenax::Status status = tenax::Status::ok();
  while (status.is_ok()) {
    status = a.client->watch(kWatchSlice);
    if (c.stopping()) return;
  }
  a.aborted = Clock::now();
  if (status.code() != tenax::StatusCode::kAborted) return c.fail(node + ": " + status.to_string());
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (!c.killed) c.errors.push_back(node + ": generation 0 ended before any node died: " + status.message());
    ++c.aborted;
    c.changed.notify_all();
  }
  auto second = a.client->join(kJoinTimeout);
  a.reassigned = Clock::now();
  if (!second.is_ok()) return c.fail(node + ": second join failed: " + second.status().to_string());
  a.second = second.value();
  c.count(c.reassigned);
  while (!c.stopping()) {
    status = a.client->watch(kWatchSlice);
    if (!status.is_ok() && !c.stopping()) return c.fail(node + ": generation 1 ended: " + status.to_string());
  }
}

std::string node_id(int i) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "node-%05d", i);
  return buffer;
}

// Every assignment in `which` (first or second) of the agents in `who`: generation `g`,
// `num_nodes` nodes, ranks 0..num_nodes-1 each once. "" if so, else what is wrong.
std::string check_assignments(const std::vector<Agent>& agents, const std::vector<int>& who, bool second,
                              std::int64_t g, int num_nodes) {
  std::vector<int> ranks;
  for (int i : who) {
    const auto& a = second ? agents[i].second : agents[i].first;
    if (!a) return node_id(i) + " holds no assignment";
    if (a->generation != g || a->num_nodes != num_nodes) {
      return node_id(i) + " got generation " + std::to_string(a->generation) + " of " + std::to_string(a->num_nodes) +
             " nodes, expected " + std::to_string(g) + " of " + std::to_string(num_nodes);
    }
    ranks.push_back(a->node_rank);
  }
  std::sort(ranks.begin(), ranks.end());
  if (ranks.size() != static_cast<std::size_t>(num_nodes)) return "expected " + std::to_string(num_nodes) + " nodes";
  for (int r = 0; r < num_nodes; ++r) {
    if (ranks[static_cast<std::size_t>(r)] != r) return "node ranks are not 0.." + std::to_string(num_nodes - 1);
  }
  return "";
}

// CPU of each thread of the service between two thread_ticks() readings, busiest first.
std::string thread_cpu_json(const std::map<int, ThreadTicks>& before, const std::map<int, ThreadTicks>& after,
                            double wall_s, double& zmq_io_share, double& busiest_other_share) {
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::vector<std::pair<double, std::string>> rows;
  zmq_io_share = 0;
  busiest_other_share = 0;
  for (const auto& [tid, t] : after) {
    const auto b = before.find(tid);
    const long long ticks = t.ticks - (b == before.end() ? 0 : b->second.ticks);
    const double share = static_cast<double>(ticks) / tick / wall_s;
    if (t.comm.rfind("ZMQbg/IO", 0) == 0) {
      zmq_io_share += share;
    } else if (t.comm.rfind("ZMQbg/", 0) != 0) {
      busiest_other_share = std::max(busiest_other_share, share);
    }
    rows.emplace_back(share, t.comm + "/" + std::to_string(tid));
  }
  std::sort(rows.rbegin(), rows.rend());
  std::ostringstream out;
  out << "{";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    out << (i ? ", " : "") << "\"" << rows[i].second << "\": " << rows[i].first;
  }
  out << "}";
  return out.str();
}

int run(const Args& a) {
  raise_fd_limit(a.nodes);
  const el::JobKeys keys = el::JobKeys::generate();

  // The service's process is forked before this one starts any thread (fork copies only the
  // calling thread: a ZeroMQ context must not cross it).
  int to_child_fds[2];
  int from_child_fds[2];
  if (::pipe2(to_child_fds, O_CLOEXEC) != 0 || ::pipe2(from_child_fds, O_CLOEXEC) != 0) die("pipe2 failed");
  tenax::UniqueFd to_child[2] = {tenax::UniqueFd(to_child_fds[0]), tenax::UniqueFd(to_child_fds[1])};
  tenax::UniqueFd from_child[2] = {tenax::UniqueFd(from_child_fds[0]), tenax::UniqueFd(from_child_fds[1])};
  std::fflush(nullptr);
  const pid_t service_pid = ::fork();
  if (service_pid < 0) die(std::string("fork: ") + std::strerror(errno));
  if (service_pid == 0) {
    to_child[1].reset();
    from_child[0].reset();
    serve(a, keys, to_child[0].get(), from_child[1].get());
  }
  to_child[0].reset();
  from_child[1].reset();
  const auto endpoint = read_line(from_child[0].get());
  if (!endpoint) die("the service process ended before it listened (see its log)");
  // Each client logs a line per generation and a warning when one ends: 2,000 lines at 1,024
  // nodes would cost more than the rendezvous and say nothing here. Errors still show.
  tenax::logger("tenax.elastic")->set_level(spdlog::level::err);

  // Other processes' loopback traffic, taken before any client exists.
  const LoopbackCount base0 = loopback();
  const auto base_t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const LoopbackCount base1 = loopback();
  const double baseline_Bps = static_cast<double>(base1.bytes - base0.bytes) / seconds(Clock::now() - base_t0);

  std::mt19937_64 rng(a.seed);
  const int victim = static_cast<int>(rng() % static_cast<std::uint64_t>(a.nodes));
  std::vector<Agent> agents(static_cast<std::size_t>(a.nodes));
  Coordination c;
  const double cpu_start = process_cpu_s(service_pid);
  const auto connect_t0 = Clock::now();
  for (int i = 0; i < a.nodes; ++i) {
    Agent& agent = agents[static_cast<std::size_t>(i)];
    agent.victim = i == victim;
    try {
      agent.client = std::make_unique<el::RendezvousClient>(
          *endpoint, el::RendezvousClientOptions(node_id(i), "127.0.0.1", 1).keys(keys));
      agent.thread = std::thread(drive, std::ref(agent), node_id(i), std::ref(c));
    } catch (const std::exception& e) {
      die("starting agent " + std::to_string(i) + " of " + std::to_string(a.nodes) + " failed: " + e.what() +
          " (threads: /proc/sys/kernel/threads-max, pid_max; memory)");
    }
  }
  const double connect_s = seconds(Clock::now() - connect_t0);
  // The CURVE handshakes run in the background; let them finish so that `form` is the
  // rendezvous, not the connections.
  std::this_thread::sleep_for(milliseconds(1000 + a.nodes));
  const double cpu_connected = process_cpu_s(service_pid);

  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.go = true;
  }
  c.changed.notify_all();
  c.wait("generation 0 (all " + std::to_string(a.nodes) + " nodes)", [&] { return c.assigned == a.nodes; });
  const double cpu_formed = process_cpu_s(service_pid);
  Clock::time_point first_call = Clock::time_point::max();
  Clock::time_point all_assigned{};
  std::vector<int> everyone;
  std::vector<int> survivors;
  for (int i = 0; i < a.nodes; ++i) {
    const Agent& agent = agents[static_cast<std::size_t>(i)];
    first_call = std::min(first_call, agent.join_call);
    all_assigned = std::max(all_assigned, agent.assigned);
    everyone.push_back(i);
    if (i != victim) survivors.push_back(i);
  }
  const std::string bad_first = check_assignments(agents, everyone, false, 0, a.nodes);
  if (!bad_first.empty()) die("generation 0: " + bad_first);

  // The steady window, after a second for the formation's last messages.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  const double steady_cpu0 = process_cpu_s(service_pid);
  const auto steady_threads0 = thread_ticks(service_pid);
  const LoopbackCount lo0 = loopback();
  const double self0 = self_cpu_s();
  const auto steady_t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(a.steady_s));
  const double steady_cpu1 = process_cpu_s(service_pid);
  const auto steady_threads1 = thread_ticks(service_pid);
  const LoopbackCount lo1 = loopback();
  const double self1 = self_cpu_s();
  const double steady_wall = seconds(Clock::now() - steady_t0);
  c.check("in the steady window (a generation that ends there is a false death)");

  // The death: no leave(), the client's sockets just close. At a random point of the victim's
  // heartbeat cycle: this program's timeline is otherwise locked to the cycle (the beats start
  // at join()), and detection, 2.5 s after the last beat, would always see the same phase.
  Agent& dead = agents[static_cast<std::size_t>(victim)];
  if (dead.thread.joinable()) dead.thread.join();
  const el::HeartbeatOptions heartbeat;  // the defaults, as both sides use them
  std::this_thread::sleep_for(milliseconds(rng() % static_cast<std::uint64_t>(heartbeat.interval().count())));
  const double cpu_death = process_cpu_s(service_pid);
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.killed = true;
  }
  const auto death = Clock::now();
  dead.client.reset();
  c.wait("generation 1 (the " + std::to_string(a.nodes - 1) + " survivors)",
         [&] { return c.reassigned == a.nodes - 1; });
  const double cpu_reformed = process_cpu_s(service_pid);
  const std::string bad_second = check_assignments(agents, survivors, true, 1, a.nodes - 1);
  if (!bad_second.empty()) die("generation 1: " + bad_second);
  Clock::time_point first_abort = Clock::time_point::max();
  Clock::time_point last_abort{};
  Clock::time_point all_reassigned{};
  for (int i : survivors) {
    const Agent& agent = agents[static_cast<std::size_t>(i)];
    first_abort = std::min(first_abort, agent.aborted);
    last_abort = std::max(last_abort, agent.aborted);
    all_reassigned = std::max(all_reassigned, agent.reassigned);
  }

  {
    std::lock_guard<std::mutex> lock(c.mutex);
    c.stop = true;
  }
  c.changed.notify_all();
  for (auto& agent : agents) {
    if (agent.thread.joinable()) agent.thread.join();
  }
  to_child[1].reset();  // the service reports and stops
  const std::string service_stats = read_line(from_child[0].get()).value_or("{}");
  int wait_status = 0;
  ::waitpid(service_pid, &wait_status, 0);
  const auto teardown_t0 = Clock::now();
  agents.clear();
  const double teardown_s = seconds(Clock::now() - teardown_t0);

  c.check("after generation 1 formed");
  if (!WIFEXITED(wait_status) || WEXITSTATUS(wait_status) != 0) die("the service process failed; see its log");
  if (service_stats.find("\"nodes_lost\": 1,") == std::string::npos ||
      service_stats.find("\"refused_peers\": 0}") == std::string::npos) {
    die("the service should have lost exactly one node and refused none: " + service_stats);
  }

  const double last_call_s = seconds(a.last_call_ms ? milliseconds(*a.last_call_ms) : el::kDefaultLastCall);
  // Heartbeat round trips (HEARTBEAT + PULSE) the window held: one per node per interval.
  const double beats = a.nodes * steady_wall / seconds(heartbeat.interval());
  const double steady_bytes = static_cast<double>(lo1.bytes - lo0.bytes);
  double zmq_io_share = 0;
  double busiest_other_share = 0;
  const std::string threads_json =
      thread_cpu_json(steady_threads0, steady_threads1, steady_wall, zmq_io_share, busiest_other_share);
  std::ostringstream out;
  out << "RDZV_RESULT {\"nodes\": " << a.nodes << ", \"seed\": " << a.seed << ", \"victim\": \"" << node_id(victim)
      << "\", \"heartbeat_ms\": " << heartbeat.interval().count() << ", \"liveness\": " << heartbeat.liveness()
      << ", \"last_call_s\": " << last_call_s << ", \"connect_s\": " << connect_s
      << ", \"connect_service_cpu_s\": " << cpu_connected - cpu_start
      << ", \"form_s\": " << seconds(all_assigned - first_call)
      << ", \"form_service_cpu_s\": " << cpu_formed - cpu_connected << ", \"steady_wall_s\": " << steady_wall
      << ", \"service_cpu_share\": " << (steady_cpu1 - steady_cpu0) / steady_wall
      << ", \"service_zmq_io_share\": " << zmq_io_share << ", \"service_busiest_other_share\": " << busiest_other_share
      << ", \"service_us_per_heartbeat\": " << (steady_cpu1 - steady_cpu0) / beats * 1e6
      << ", \"lo_Bps\": " << steady_bytes / steady_wall << ", \"lo_baseline_Bps\": " << baseline_Bps
      << ", \"lo_packets_per_s\": " << static_cast<double>(lo1.packets - lo0.packets) / steady_wall
      << ", \"bytes_per_heartbeat\": " << steady_bytes / beats
      << ", \"clients_cpu_share\": " << (self1 - self0) / steady_wall
      << ", \"detect_s\": " << seconds(first_abort - death) << ", \"notified_s\": " << seconds(last_abort - death)
      << ", \"reform_s\": " << seconds(all_reassigned - death)
      << ", \"reform_after_notified_s\": " << seconds(all_reassigned - last_abort)
      << ", \"reform_service_cpu_s\": " << cpu_reformed - cpu_death << ", \"teardown_s\": " << teardown_s
      << ", \"service\": " << service_stats << ", \"service_threads\": " << threads_json << "}";
  std::printf("%s\n", out.str().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    die(e.what());
  }
}
