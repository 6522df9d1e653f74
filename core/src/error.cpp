#include "tenax/core/error.h"

// Header-only today; this translation unit keeps the exception vtables in one place.
namespace tenax {}
