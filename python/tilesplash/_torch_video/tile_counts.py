"""What the tiles of a flex VideoAttention head count: the pairs inside the tiles its
plans visit (the report's tiles_visited), the pairs its sink segment skips under
granularity="tile" (its density), and a spatial head's band and sink rounded apart
(docs/masks.md), all as the native backend counts them (src/routing/head_runs.cc).
A mixin of FlexVideo (video.py): it reads the runner's tokens, block, granularity,
runs and the cache of visited pairs."""

from __future__ import annotations

import numpy as np

from .. import _core
from .._mask import Mask, core_mask
from .._flex.tables import plan_tables


def visited_pairs(tables) -> float:
    """Pairs inside the tiles a plan visits (ragged edge tiles counted in range)."""
    rows = np.minimum(tables.block_q, tables.q_len - tables.block_q * np.arange(tables.q_blocks))
    cols = np.minimum(tables.block_kv,
                      tables.kv_len - tables.block_kv * np.arange(tables.kv_blocks))
    return float(((tables.tiles != 0) * rows[:, None] * cols[None, :]).sum())



class TileCounts:
    """FlexVideo's tile accounting (a mixin)."""

    def _visited(self, mask, q_len, kv_len) -> float:
        """Pairs inside the tiles the plan of `mask` visits."""
        key = (mask, q_len, kv_len)
        if key not in self._visited_cache:
            tables = plan_tables(mask, q_len, kv_len, *self.block)
            self._visited_cache[key] = visited_pairs(tables)
        return self._visited_cache[key]

    def candidate_visited(self, name, band, segment, key_limit, original):
        """(pairs inside the tiles a head of candidate `name` visits, pairs of them its
        segment skips), over n^2: its band's plan (band: the mask its call runs) and, in
        another order, the segment call's (segment: None or (mask, key count))."""
        n = self.tokens
        if original:
            return self._tiles_visited(self.runs[name], band, key_limit)
        visited, skipped = self._visited(band, n, n), 0.0
        if segment is not None:
            visited += self._visited(segment[0], n, segment[1])
            skipped = self._segment_skipped(segment[0], segment[1])
        return visited / (n * n), skipped

    def _segment_skipped(self, mask, count) -> float:
        """Tile granularity: the pairs of a segment's visited tiles that it skips (its
        partial tiles hold the band's pairs: head_runs.cc), over n^2; else 0."""
        if self.granularity != "tile":
            return 0.0
        n = self.tokens
        kept = plan_tables(mask, n, count, *self.block).kept_pairs
        return (self._visited(mask, n, count) - kept) / (n * n)

    def tile_segment_mask(self, run) -> Mask:
        """granularity "tile", a head in the original order with a separate key segment
        (the first-frame sink of spatial heads: keys first .. first + count, stride 1):
        its band and its segment rounded apart, as the native backend rounds them
        (docs/masks.md), in one mask over every key, so one call runs both. The
        segment rounded on its own keys ends at its last key, where the whole mask
        rounded at once would keep the rest of that tile (issue 37, item 1). The
        segment's pairs inside the rounded band count once: a union, where native
        merges the band and segment_minus() of the segment."""
        n, (bq, bk) = self.tokens, self.block
        extra = run["extra"]
        first, count = extra["first"], extra["count"]
        if extra["stride"] != 1 or first % bk:
            raise NotImplementedError(  # no registered method makes such a segment
                f"a key segment at {first} with stride {extra['stride']} in the original order")
        band = run["run_mask"].tile_granular(n, n, bq, bk)
        # The segment's rounding in the key axis: tiles of the segment's own keys, which
        # start at a tile boundary here, clipped to its last key. The rounded whole
        # mask's tiles on those keys are the band's or the segment's (both kept).
        segment = run["mask"].tile_granular(n, n, bq, bk) & Mask.key_range(first, first + count)
        return band | segment

    def _tiles_visited(self, run, mask, key_limit):
        """(a head's visited pairs / n^2 as the native backend counts them, the pairs of
        them its segment skips / n^2): the rounded band's plan, plus the segment's own
        plan when the head has one (tile granularity)."""
        n = self.tokens
        if self.granularity != "tile" or run is None or run["extra"] is None \
                or run["order"] is not None:
            return self._visited(mask, n, n) / (n * n), 0.0
        extra = run["extra"]
        band = run["run_mask"].tile_granular(n, n, *self.block)
        if key_limit is not None:
            band = band & Mask.key_range(0, key_limit)
        segment = Mask(_core.Mask.segment_minus(
            core_mask(extra["mask"].tile_granular(n, extra["count"], *self.block)),
            core_mask(band), extra["first"], extra["stride"]))
        visited = self._visited(band, n, n) + self._visited(segment, n, extra["count"])
        return visited / (n * n), self._segment_skipped(segment, extra["count"])
