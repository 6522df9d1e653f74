// One system's side of bench/communicator_bench.py: allreduce (float32 sum) latency and
// throughput of one CPU communicator (gloo or tcp), `--ranks` ranks as threads of this process
// over an in-memory store, for each of `--sizes` (bytes). Per size: `--warmup` calls, then calls
// until `--min-seconds` have passed (at least 3); rank 0's wall time per call is printed. Every
// call's result is checked (rank r contributes r + 1 to every element): a wrong sum exits 1.
//
//   communicator_bench --backend tcp --ranks 2 --sizes 8,65536,1048576,91226112
// prints one JSON object per line: {"backend": "tcp", "bytes": 8, "calls": N, "seconds_per_call": s}
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "tenax/core/error.h"
#include "tenax/elastic/backend.h"
#include "tenax/elastic/in_memory_store.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace tenax::elastic;

struct Options {
  Backend backend = Backend::kTcp;
  int ranks = 2;
  std::vector<std::size_t> sizes{8, 65536, 1 << 20, 91226112};
  int warmup = 3;
  double min_seconds = 0.5;
};

Options parse(int argc, char** argv) {
  Options o;
  std::string backend = "tcp";
  CLI::App app("allreduce time per call of one CPU communicator (bench/communicator_bench.py runs it)",
               "communicator_bench");
  app.add_option("--backend", backend, "gloo or tcp")->check(CLI::IsMember({"gloo", "tcp"}));
  app.add_option("--ranks", o.ranks, "ranks (threads)")->check(CLI::Range(2, 64));
  app.add_option("--sizes", o.sizes, "message sizes in bytes, multiples of 4")
      ->delimiter(',')
      ->check(CLI::Validator(
          [](const std::string& v) {
            std::size_t bytes = 0;
            const bool number = CLI::detail::lexical_cast(v, bytes);
            return number && bytes > 0 && bytes % sizeof(float) == 0 ? std::string()
                                                                     : v + " is not a positive multiple of 4";
          },
          "BYTES"));
  app.add_option("--warmup", o.warmup, "untimed calls per size")->check(CLI::NonNegativeNumber);
  app.add_option("--min-seconds", o.min_seconds, "timed calls per size last at least this long")
      ->check(CLI::PositiveNumber);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e) == 0 ? 0 : 2);
  }
  o.backend = parse_backend(backend, "--backend");
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  InMemoryStore store;
  std::vector<std::string> lines;
  std::atomic<bool> wrong{false};
  std::vector<std::thread> threads;
  for (int r = 0; r < o.ranks; ++r) {
    threads.emplace_back([&, r] {
      CommunicatorOptions options;
      options.timeout = std::chrono::seconds(120);
      auto comm = make_communicator(o.backend, store, r, o.ranks, options);
      const float expected = static_cast<float>(o.ranks * (o.ranks + 1) / 2);
      for (std::size_t bytes : o.sizes) {
        std::vector<float> data(bytes / sizeof(float));
        auto call = [&] {
          std::fill(data.begin(), data.end(), static_cast<float>(r + 1));
          comm->allreduce(data.data(), data.size(), ElementType::kFloat32, ReduceOp::kSum);
          if (data.front() != expected || data.back() != expected) wrong = true;
        };
        for (int i = 0; i < o.warmup; ++i) call();
        // Every rank runs the same number of calls: rank 0 decides how many from its warm-up
        // timing and tells the others (a broadcast outside the timed loop).
        std::int64_t calls = 0;
        if (r == 0) {
          const auto t0 = Clock::now();
          call();
          const double one = std::chrono::duration<double>(Clock::now() - t0).count();
          calls = std::max<std::int64_t>(3, static_cast<std::int64_t>(o.min_seconds / std::max(one, 1e-6)));
        } else {
          call();
        }
        comm->broadcast(&calls, sizeof calls, 0);
        comm->barrier();
        const auto t0 = Clock::now();
        for (std::int64_t i = 0; i < calls; ++i) call();
        const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        if (r == 0) {
          lines.push_back(
              fmt::format(R"({{"backend": "{}", "ranks": {}, "bytes": {}, "calls": {}, "seconds_per_call": {:.9f}}})",
                          backend_name(o.backend), o.ranks, bytes, calls, seconds / static_cast<double>(calls)));
        }
      }
      comm->barrier();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& line : lines) std::cout << line << "\n";
  if (wrong) {
    std::cerr << "communicator_bench: an allreduce returned a wrong sum\n";
    return 1;
  }
  return 0;
}
