"""FlexAttention's own code: BlockMasks from tilesplash plans (tables.py, masks.py,
stacked.py, cluster_masks.py), kernel options and tuning, the compiled call, the
flex backend's settings and the op dynamo traces. The device-neutral torch video
runner that calls it is _torch_video/. Private: tilesplash.flex is its public face.
Importing it imports torch (settings.py alone does not)."""
