/* The checks of the C API's tests (C99, no GoogleTest): a failed check is printed with its file
 * and line and counted in `failures`; the test's main returns non-zero when any failed. One
 * header for every C test program (each is a single translation unit). */
#ifndef TENAX_TESTS_CAPI_CHECK_H
#define TENAX_TESTS_CAPI_CHECK_H

#include <stdio.h>
#include <string.h>

#include "tenax.h"

static int failures = 0;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      ++failures;                                                              \
    }                                                                          \
  } while (0)

#define CHECK_OK(call)                                                                                \
  do {                                                                                                \
    tenax_status status_ = (call);                                                                    \
    if (status_ != TENAX_OK) {                                                                        \
      fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, tenax_status_name(status_), \
              tenax_last_error());                                                                    \
      ++failures;                                                                                     \
    }                                                                                                 \
  } while (0)

/* The call must fail with `want` and a message that contains `needle` (the argument's name). */
#define CHECK_FAILS(call, want, needle) check_fails((call), (want), (needle), #call, __FILE__, __LINE__)

static inline void check_fails(tenax_status got, tenax_status want, const char* needle, const char* text,
                               const char* file, int line) {
  const char* message = tenax_last_error();
  if (got != want || strstr(message, needle) == NULL) {
    fprintf(stderr, "%s:%d: %s -> %s \"%s\"; wanted %s with \"%s\" in the message\n", file, line, text,
            tenax_status_name(got), message, tenax_status_name(want), needle);
    ++failures;
  } else {
    printf("  as expected: %s: %s\n", tenax_status_name(got), message);
  }
}

#endif /* TENAX_TESTS_CAPI_CHECK_H */
