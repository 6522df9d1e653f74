// A TCP port that is free on this host now: MASTER_PORT for the store that a generation's rank 0
// hosts itself (PyTorch's TCPStore under init_method="env://"). Picked anew for every generation,
// as torchrun's agent does at each rendezvous: a process of the last generation that still holds
// the old port (a grandchild that escaped the worker's process group) cannot fail the next one.
//
// The port is found by binding port 0 on every address (IPv6 with IPv4 mapped where the host has
// IPv6, else IPv4) and closing the socket again, as torchrun's agent does: between the close and
// rank 0's bind another process could take it (the same window torchrun has); rank 0 then fails
// to bind, the generation fails and the next one picks another port.
// Thread-safety: a pure function over the kernel's socket table.
#pragma once

namespace tenax::launcher {

/// A port in 1..65535 that no socket on this host is bound to. Throws tenax::Error (naming the
/// failing call and errno) when no socket can be bound at all.
int pick_free_port();

}  // namespace tenax::launcher
