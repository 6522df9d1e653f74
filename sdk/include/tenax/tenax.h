// Umbrella header of Tenax.
#pragma once

#include "tenax/core/error.h"
#include "tenax/core/logging.h"
#include "tenax/sdk.h"
