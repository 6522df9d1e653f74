// Sanitizer settings for storage_test (used only in the Asan and Tsan build types; inert otherwise).
//
// StorageReader.FlippedBytesAnywhereNeverCrash feeds damaged HDF5 metadata to libhdf5 on
// purpose. libhdf5 1.10.8 then asks malloc for absurd sizes (which plain malloc refuses and
// HDF5 turns into an error, as in production) and leaks a few bytes on those error paths.
// Neither is Tenax code; these hooks make ASan and TSan behave like plain malloc for the former and
// ignore libhdf5's own leaks, while still checking everything else.

extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
extern "C" const char* __tsan_default_options() { return "allocator_may_return_null=1"; }

extern "C" const char* __lsan_default_suppressions() { return "leak:libhdf5_serial.so\n"; }
