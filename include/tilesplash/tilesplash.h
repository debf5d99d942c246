// Umbrella header: masks (what), plans (which tiles), attention (how).
#pragma once

#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/peak.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/version.h"
