#pragma once
// The thread that writes a rank's checkpoints: one for the Checkpointer's life, started by its
// first task, rather than one per save. Creating a thread is cheap next to a write, but it is
// paid inside the caller's save call, which a simulation makes from its solver loop (0.04 ms
// of a 0.4 ms stall: bench/sim_overhead.py).

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tenax::sdk::detail {

class WriterThread {
 public:
  WriterThread() = default;
  /// Finishes the task in hand (if any), then joins.
  ~WriterThread();
  WriterThread(const WriterThread&) = delete;
  WriterThread& operator=(const WriterThread&) = delete;

  /// Runs `task` on the thread. One task at a time: the caller posts the next one only after
  /// it has seen the previous one finish (the Checkpointer waits on its save's future).
  void post(std::function<void()> task);

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::function<void()> task_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tenax::sdk::detail
