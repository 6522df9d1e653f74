// "Stop waiting": raised by one thread to release another that is blocked inside a
// communicator — in a collective, a send or receive, or still connecting the mesh (issue 33:
// nobody waits on a dead peer). Under in-process recovery the worker's generation watch
// (generation_watch.h) raises the signal of a generation as soon as the agent declares a newer
// one, so a survivor blocked on a peer that will never answer leaves within milliseconds
// instead of at the transport's timeout.
//
// The communicator that honours it (Gloo; see gloo_communicator.h) sets a cut: what makes its
// blocked calls fail (they then throw PeerLostError). Raising runs the cut once; a cut set
// after the signal was raised runs at once. The cut holds no reference that would keep a
// communicator alive; it must tolerate being called while the communicator is destroyed.
// Thread-safety: every member may be called from any thread.
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace tenax::elastic {

class AbortSignal {
 public:
  /// Raises the signal (the first call only; later reasons are dropped) and runs the cut.
  void raise(const std::string& reason);
  bool raised() const;
  /// Why it was raised; empty while it is not.
  std::string reason() const;
  /// What raise() does to the communicator (replaces the previous one). Runs now when raised.
  void set_cut(std::function<void()> cut);

 private:
  mutable std::mutex mutex_;
  bool raised_ = false;
  std::string reason_;
  std::function<void()> cut_;
};

}  // namespace tenax::elastic
