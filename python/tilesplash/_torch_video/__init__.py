"""The device-neutral torch runner of VideoAttention (backend="flex" today): routing
on the tensors' device (route.py, row_rules.py), the calls a layer makes (runner.py,
lanes.py: one per row order and mask need, the sink inside), svg2's clusters
(clusters.py), tile counts and the report read from the device on first use
(tile_counts.py, report.py). The kernels that run the calls sit behind one small
interface in kernels/ (adding one: a file there and a line in kernels/__init__.py);
what is FlexAttention's own (BlockMasks from plans, kernel options, tuning, the
compiled call) lives in _flex/."""
