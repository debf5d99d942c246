// Umbrella header: masks (what), plans (which tiles), attention (how), and the
// video front door, tuner and tensor files built on them.
#pragma once

#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/peak.h"
#include "tilesplash/plan.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor.h"
#include "tilesplash/tensor_io.h"
#include "tilesplash/tuning.h"
#include "tilesplash/version.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"
