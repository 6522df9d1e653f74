// ThreadSanitizer suppressions for elastic_test (used only when built with -fsanitize=thread).
//
// libzmq is not instrumented: its I/O thread writes received bytes with recv(2), and hands the
// message to the socket's owner through lock-free pipes TSan cannot see, so reading those
// bytes in our code is reported as a race. Every frame of ours is read after zmq_msg_recv
// returned it, which is the synchronisation libzmq documents.
extern "C" const char* __tsan_default_suppressions() { return "called_from_lib:libzmq.so.5\n"; }
