// The temporary files of unfinished atomic writes, kept where a signal handler
// can reach them: a fixed table of path buffers, no allocation and no locks on
// the handler's side, so SIGINT or SIGTERM during a write removes them instead
// of leaving "*.tmp.*" litter beside the target.
#pragma once

#include <string>

namespace tilesplash::io {

// Returns a slot id, or -1 when the table is full or the path too long (the
// file is then only removed by its owner, as before).
int register_temporary(const std::string& path);
// Forget the slot (after the file was renamed into place or removed).
void unregister_temporary(int slot);
// unlink()s every registered path; async-signal-safe.
void remove_registered_temporaries();

}  // namespace tilesplash::io
