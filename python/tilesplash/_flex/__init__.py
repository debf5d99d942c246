"""FlexAttention, the backend of tilesplash's torch entry points on every device
but the native kernel's CPU (and on the CPU with backend="flex"). Private:
tilesplash.flex is its public face. Importing it imports torch."""
