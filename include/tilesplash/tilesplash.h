// Umbrella header: masks (what), plans (which tiles), attention (how), and the
// video front door, tuner, tensor files and whole-tensor entry points built on them.
#pragma once

#include "tilesplash/attention.h"
#include "tilesplash/batched_attention.h"
#include "tilesplash/evaluation.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/merge.h"
#include "tilesplash/peak.h"
#include "tilesplash/plan.h"
#include "tilesplash/plan_cache.h"
#include "tilesplash/plan_window.h"
#include "tilesplash/routing.h"
#include "tilesplash/tensor.h"
#include "tilesplash/tensor_io.h"
#include "tilesplash/tuning.h"
#include "tilesplash/version.h"
#include "tilesplash/video.h"
#include "tilesplash/video_plan.h"
#include "tilesplash/workload.h"
