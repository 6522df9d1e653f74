// Sanitizer settings for the fuzz targets and their corpus replays (inert without ASan). Written
// for the checkpoint reader's libhdf5; the other readers' targets use them too, so that a huge
// allocation in Tenax code is a finding in every target (operator new aborts above 2 GiB).
// tests/fuzz/README.md ("Findings") has the inputs and stacks behind each setting.
//
// allocator_may_return_null=1: sealed-checkpoint inputs feed damaged HDF5 metadata to libhdf5
// on purpose, and libhdf5 1.10.8 then asks malloc for absurd sizes (e.g. 2^40 bytes for a
// corrupted object header continuation length). Plain malloc refuses those and HDF5 reports an
// error, as in production; this makes ASan's malloc do the same instead of aborting. A
// throwing operator new that fails still aborts under ASan, so a huge allocation in Tenax code
// is still a finding. Same setting as tests/storage/sanitizer_options.cpp.
//
// max_allocation_size_mb=2048: a malloc above 2 GiB returns NULL too (the same limit as
// libFuzzer's -malloc_limit_mb, which would instead end the run). Damaged object headers make
// libhdf5 ask for 16 GiB and then touch it; with NULL it reports an error. operator new still
// aborts above the limit, so an oversized allocation in Tenax code remains a finding.
//
// quarantine_size_mb=16 (default 256): sealed inputs fork a probe child (hdf5_probe.h) whose
// cost grows with the parent's resident memory, most of which is ASan's quarantine of freed
// blocks; 16 MiB still delays reuse of freed memory across several inputs, and nearly doubles
// the executions per second.
//
// leak:libhdf5_serial.so: libhdf5 1.10.8 leaks on some corrupt-metadata error paths (e.g. the
// 56-byte continuation-message array of a corrupt object header, HDFGroup/hdf5#2599, fixed
// upstream in 1.14.1). libhdf5 has no frame pointers, so with ASan's fast unwinder the stack
// of such an allocation is just malloc <- libhdf5 and can only be matched by module. Memory
// that Tenax code allocates is still reported (its stack starts in our frames), except inside
// an HDF5 callback (error_text's collector, which appends to a caller-owned string).
// TENAX_FUZZ_REPORT_HDF5_LEAKS=1 turns the suppression off to list libhdf5's leaks (run with
// ASAN_OPTIONS=fast_unwind_on_malloc=0 for full stacks).

#include <cstdlib>

extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1:max_allocation_size_mb=2048:quarantine_size_mb=16";
}

extern "C" const char* __lsan_default_suppressions() {
  return std::getenv("TENAX_FUZZ_REPORT_HDF5_LEAKS") != nullptr ? "" : "leak:libhdf5_serial.so\n";
}
