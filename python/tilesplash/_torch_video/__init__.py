"""The device-neutral torch side of VideoAttention: routing on the tensors' device
(route.py) and the report read from the device on first use (report.py). Any
torch kernel (FlexAttention today, _flex/) runs the calls they decide."""
