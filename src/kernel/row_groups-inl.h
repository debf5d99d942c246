// How many query rows one micro-kernel call takes, and the dispatch of a run
// time row count to the micro-kernels' compile-time one. Included by
// kernel-inl.h inside a target's namespace, before the paths and the flash
// loop that use it.

// Calls body.template operator()<R>() with R = rows (1..Max) as a
// compile-time value, so every micro-kernel is unrolled for its row count.
template <int Max, int R = 1, typename F>
inline void with_rows_up_to(int rows, F&& body) {
  if constexpr (R == Max) {
    body.template operator()<R>();
  } else if (rows == R) {
    body.template operator()<R>();
  } else {
    with_rows_up_to<Max, R + 1>(rows, body);
  }
}

// The same for register tiles of the traits' kRows rows.
template <typename F>
inline void with_rows(int rows, F&& body) {
  with_rows_up_to<kRows>(rows, body);
}

// Query rows per micro-kernel call of a path: the traits' register tile,
// unless the path's products run elsewhere than in vector registers and
// declare their own (AmxBf16Path: the 16 rows of an AMX tile).
template <typename Path>
constexpr int path_tile_rows() {
  if constexpr (requires { Path::kTileRows; }) {
    return Path::kTileRows;
  } else {
    return kRows;
  }
}
