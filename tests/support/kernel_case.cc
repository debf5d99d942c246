#include "support/kernel_case.h"

namespace tilesplash::test {

AttentionOptions KernelCase::options(Precision precision) const {
  AttentionOptions options{scale, mode, threads, /*check_finite=*/true};
  options.precision = precision;
  options.product_path = path;
  options.variant = variant;
  return options;
}

void PrintTo(const KernelCase& c, std::ostream* os) {
  *os << c.name << " mask=" << c.mask.to_string() << " " << c.q_len << "x" << c.kv_len
      << " blocks=" << c.blocks.block_q << "x" << c.blocks.block_kv << " heads=" << c.heads
      << " d=" << c.d << " dv=" << c.value_dim() << " " << to_string(c.dtype)
      << " out=" << to_string(c.out_dtype()) << " mode=" << to_string(c.mode)
      << " threads=" << c.threads << " path=" << to_string(c.path)
      << " variant=" << to_string(c.variant)
      << " scale=" << (c.scale ? std::to_string(*c.scale) : std::string("default"));
}

}  // namespace tilesplash::test
