// Malformed tensor files: each case is a file built byte by byte (no Python)
// that must be rejected with one InputError line of the form "<file>: <problem>"
// whose problem names what is wrong. Plus exhaustive truncations and byte
// flips of valid files, which must either load or fail the same clean way.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/strided_views.h"
#include "tensor_io_files.h"
#include "tilesplash/tensor_io.h"

namespace tilesplash {
namespace {

using test::le_bytes;
using test::npy_dict;
using test::npy_file;
using test::safetensors_file;

struct Case {
  std::string name;
  std::string file;      // written into the test's directory
  std::string bytes;     // file contents
  std::string suffix;    // appended to the path to form the read_tensor spec
  std::string expected;  // must appear in the message
};

const std::string kData = test::f32_bytes({1, 2, 3, 4, 5, 6});  // (2, 3) f32
const std::string kGood = npy_dict("<f4", "(2, 3)");

std::string deep(int depth, char open, char close, std::string_view inner) {
  return std::string(depth, open) + std::string(inner) + std::string(depth, close);
}

std::string with_length(std::string file, std::uint64_t length, int bytes) {
  file.replace(8, bytes, le_bytes(length, bytes));
  return file;
}

std::string st_entry(std::string_view name, std::string_view body) {
  return "\"" + std::string(name) + "\":{" + std::string(body) + "}";
}

const std::string kQ = st_entry("q", R"("dtype":"F32","shape":[2,2],"data_offsets":[0,16])");
const std::string kV = st_entry("v", R"("dtype":"F32","shape":[2],"data_offsets":[16,24])");
const std::string kStData(24, '\x01');

std::string st_one(std::string_view body) {
  return safetensors_file("{" + st_entry("q", body) + "}", kStData);
}

std::vector<Case> npy_cases() {
  std::string short_length = npy_file(kGood, kData);
  short_length = with_length(short_length, 20, 2);  // the dict is longer than 20 bytes
  std::string many_dims = "(";
  for (int i = 0; i < 33; ++i) many_dims += "1, ";
  many_dims += ")";
  return {
      {"empty_file", "q.npy", "", "", "truncated: 0 bytes"},
      {"short_preamble", "q.npy", "\x93NUMPY\x01", "", "truncated: 7 bytes"},
      {"v2_short_preamble", "q.npy", std::string("\x93NUMPY\x02\x00\x10\x00", 10), "",
       "truncated: 10 bytes, a version 2.0 .npy file starts with at least 12"},
      {"wrong_magic_zip", "q.npy", "PK\x03\x04 this is an npz", "", "looks like a zip archive"},
      {"wrong_magic_text", "q.npy", "hello, world", "", "not an .npy file (starts with 68 65"},
      {"unsupported_version", "q.npy", npy_file(kGood, kData, 4), "",
       "unsupported .npy version 4.0"},
      {"unsupported_minor_version", "q.npy",
       [] {
         std::string file = npy_file(kGood, kData);
         file[7] = 5;
         return file;
       }(),
       "", "unsupported .npy version 1.5"},
      {"header_length_beyond_file", "q.npy", with_length(npy_file(kGood, kData), 5000, 2), "",
       "truncated: header length field says 5000 bytes, file has 142 after the 10-byte preamble"},
      {"v2_header_length_beyond_file", "q.npy",
       with_length(npy_file(kGood, kData, 2), 0xfffffff0u, 4), "",
       "header length field says 4294967280 bytes"},
      {"header_length_too_small", "q.npy", short_length, "",
       "bad header: ends inside a string (is the header length field too small?)"},
      {"header_over_limit", "q.npy",
       npy_file(kGood.substr(0, kGood.size() - 1) + std::string(2 << 20, ' ') + "}", kData, 2), "",
       "exceeds the 1048576-byte limit"},
      {"header_not_a_dict", "q.npy", npy_file("[1, 2]", kData), "", "bad header: not a dict"},
      {"missing_shape", "q.npy", npy_file("{'descr': '<f4', 'fortran_order': False}", kData), "",
       "missing key 'shape'"},
      {"missing_descr", "q.npy", npy_file("{'fortran_order': False, 'shape': (6,)}", kData), "",
       "missing key 'descr'"},
      {"unknown_key", "q.npy",
       npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", kData), "",
       "unknown key 'x'"},
      {"duplicate_key", "q.npy",
       npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'shape': (6,)}", kData),
       "", "duplicate key 'shape'"},
      {"unterminated_string", "q.npy", npy_file("{'descr: '<f4'}", kData), "",
       "bad header: expected ':'"},
      {"escape_in_string", "q.npy", npy_file(npy_dict("<f\\x34", "(2, 3)"), kData), "",
       "escape sequences are not supported"},
      {"garbage_after_dict", "q.npy", npy_file(kGood + " junk", kData), "",
       "unexpected 'j' after the header dict"},
      {"control_byte_in_header", "q.npy", npy_file(std::string("{\x01}"), kData), "",
       "dict key must be a string, found \\x01"},
      {"deep_nesting", "q.npy", npy_file(npy_dict("<f4", deep(40, '(', ')', "1,")), kData), "",
       "nesting deeper than 8"},
      {"fortran_order_true", "q.npy", npy_file(npy_dict("<f4", "(2, 3)", "True"), kData), "",
       "fortran_order True is not supported"},
      {"fortran_order_not_bool", "q.npy", npy_file(npy_dict("<f4", "(2, 3)", "0"), kData), "",
       "fortran_order must be True or False, got an integer"},
      {"big_endian", "q.npy", npy_file(npy_dict(">f4", "(2, 3)"), kData), "",
       "big-endian dtype '>f4' is not supported"},
      {"unsupported_f64", "q.npy", npy_file(npy_dict("<f8", "(3,)"), kData), "",
       "unsupported dtype '<f8'"},
      {"unsupported_int", "q.npy", npy_file(npy_dict("<i4", "(2, 3)"), kData), "",
       "unsupported dtype '<i4'"},
      {"structured_dtype", "q.npy",
       npy_file("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (6,)}", kData), "",
       "structured dtypes are not supported"},
      {"shape_is_list", "q.npy", npy_file(npy_dict("<f4", "[2, 3]"), kData), "",
       "shape must be a tuple, got a list"},
      {"shape_is_parenthesized_int", "q.npy", npy_file(npy_dict("<f4", "(6)"), kData), "",
       "shape must be a tuple, got an integer"},
      {"shape_entry_not_int", "q.npy", npy_file(npy_dict("<f4", "('2', 3)"), kData), "",
       "shape entries must be integers, got a string"},
      {"shape_entry_float", "q.npy", npy_file(npy_dict("<f4", "(2.5,)"), kData), "",
       "expected ')', found '.'"},
      {"negative_shape", "q.npy", npy_file(npy_dict("<f4", "(-2, 3)"), kData), "",
       "shape entry -2 is negative"},
      {"shape_entry_overflow", "q.npy",
       npy_file(npy_dict("<f4", "(99999999999999999999, 1)"), kData), "",
       "shape entry 99999999999999999999 does not fit in 64 bits"},
      {"shape_product_overflow", "q.npy",
       npy_file(npy_dict("<f4", "(4294967296, 4294967296)"), kData), "",
       "shape [4294967296, 4294967296] is too large"},
      {"too_many_dims", "q.npy", npy_file(npy_dict("<f4", many_dims), kData), "",
       "shape has 33 dimensions, at most 32"},
      {"truncated_data", "q.npy", npy_file(npy_dict("<f4", "(1024, 1024)"), std::string(1000, 0)),
       "", "truncated: header says 4194304 bytes of data (shape [1024, 1024] f32), file has 1000"},
      {"trailing_data", "q.npy", npy_file(kGood, kData + "xyz"), "",
       "3 unexpected bytes after the data"},
  };
}

std::vector<Case> safetensors_cases() {
  const std::string two = "{" + kQ + "," + kV + "}";
  return {
      {"st_empty_file", "m.safetensors", "", "", "truncated: 0 bytes"},
      {"st_short_length", "m.safetensors", std::string("\x10\x00\x00", 3), "",
       "truncated: 3 bytes"},
      {"st_huge_header_length", "m.safetensors", le_bytes(1ull << 62, 8) + "{}", "",
       "header length 4611686018427387904 exceeds the 100000000-byte limit"},
      {"st_header_beyond_file", "m.safetensors", le_bytes(1000, 8) + "{}      ", "",
       "truncated: header length field says 1000 bytes, file has 8 after the 8-byte length"},
      {"st_invalid_json", "m.safetensors", safetensors_file("{\"q\": ", ""), "",
       "invalid JSON header: parse error"},
      {"st_invalid_utf8", "m.safetensors", safetensors_file("{\"\xff\xfe\": 1}", ""), "",
       "ill-formed UTF-8 byte; last read: '\"\\xff'"},
      {"st_json_not_object", "m.safetensors", safetensors_file("[1, 2]", ""), "",
       "JSON header is not an object"},
      {"st_deep_json", "m.safetensors",
       safetensors_file("{\"__metadata__\":" + deep(10, '[', ']', "") + "}", ""), "",
       "JSON header nests deeper than a safetensors header"},
      {"st_duplicate_name", "m.safetensors", safetensors_file("{" + kQ + "," + kQ + "}", kStData),
       ":q", "duplicate key 'q' in JSON header"},
      {"st_metadata_not_object", "m.safetensors",
       safetensors_file("{\"__metadata__\":\"x\"," + kQ + "}", kStData), ":q",
       "__metadata__ must be a JSON object"},
      {"st_entry_not_object", "m.safetensors", safetensors_file("{\"q\":5}", ""), "",
       "tensor 'q': entry must be a JSON object"},
      {"st_missing_dtype", "m.safetensors", st_one(R"("shape":[2],"data_offsets":[0,8])"), "",
       "tensor 'q': missing string 'dtype'"},
      {"st_missing_shape", "m.safetensors", st_one(R"("dtype":"F32","data_offsets":[0,8])"), "",
       "tensor 'q': missing array 'shape'"},
      {"st_offsets_arity", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[2],"data_offsets":[8])"), "",
       "'data_offsets' must be an array [begin, end]"},
      {"st_negative_offset", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])"), "",
       "data_offsets must not be negative"},
      {"st_offset_not_integer", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[2],"data_offsets":["0",8])"), "",
       "data_offsets must be non-negative integers"},
      {"st_offsets_reversed", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[1],"data_offsets":[8,4])"), "",
       "data_offsets [8, 4] end before they begin"},
      {"st_offsets_out_of_range", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[1024],"data_offsets":[0,4096])"), "",
       "data_offsets [0, 4096] are out of range (truncated? the data section has 24 bytes)"},
      {"st_offsets_disagree_with_shape", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[2,2],"data_offsets":[0,8])"), "",
       "data_offsets [0, 8] hold 8 bytes, shape [2, 2] F32 needs 16"},
      {"st_negative_shape", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])"), "",
       "shape entry -2 is negative"},
      {"st_float_shape", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[2.0],"data_offsets":[0,8])"), "",
       "shape entries must be integers"},
      {"st_shape_overflow", "m.safetensors",
       st_one(R"("dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8])"), "",
       "shape [4294967296, 4294967296] F32 is too large"},
      {"st_unsupported_dtype", "m.safetensors",
       st_one(R"("dtype":"F64","shape":[3],"data_offsets":[0,24])"), "",
       "tensor 'q' has dtype 'F64', supported: F32, F16, BF16"},
      {"st_unknown_dtype", "m.safetensors",
       st_one(R"("dtype":"Q7","shape":[3],"data_offsets":[0,24])"), "", "has dtype 'Q7'"},
      {"st_tensor_not_found", "m.safetensors", safetensors_file(two, kStData), ":k",
       "tensor 'k' not found (have: q, v)"},
      {"st_name_needed", "m.safetensors", safetensors_file(two, kStData), "",
       "holds 2 tensors, pick one with"},
      {"st_no_tensors", "m.safetensors", safetensors_file(R"({"__metadata__":{"a":"b"}})", ""), "",
       "holds no tensors"},
  };
}

std::vector<Case> spec_cases() {
  return {
      {"missing_file", "present.npy", "", ".absent.npy", "cannot open: No such file or directory"},
      {"unknown_extension", "q.bin", npy_file(kGood, kData), "", "unknown tensor file type"},
      {"npy_with_name", "q.npy", npy_file(kGood, kData), ":x", "an .npy file holds one tensor"},
      {"empty_tensor_name", "m.safetensors", safetensors_file("{" + kQ + "}", kStData), ":",
       "empty tensor name after ':'"},
  };
}

std::vector<Case> all_cases() {
  std::vector<Case> cases = npy_cases();
  for (auto list : {safetensors_cases(), spec_cases()}) {
    cases.insert(cases.end(), list.begin(), list.end());
  }
  return cases;
}

// The message must be one line, start with the file's path (quoted) and name the problem.
void expect_clean_error(const std::string& spec, const std::string& file_prefix,
                        const std::string& expected) {
  try {
    read_tensor(spec);
    ADD_FAILURE() << spec << ": loaded, expected an error containing: " << expected;
  } catch (const InputError& error) {
    const std::string message = error.what();
    EXPECT_EQ(message.rfind(quoted_name(file_prefix) + ": ", 0), 0u) << message;
    EXPECT_NE(message.find(expected), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_LT(message.size(), 600u) << message;
  }
}

class MalformedFileTest : public testing::TestWithParam<Case> {};

TEST_P(MalformedFileTest, GivesOneClearErrorLine) {
  const Case& c = GetParam();
  test::TempDir dir;
  const std::string path = dir.file(c.file);
  test::write_bytes(path, c.bytes);
  const std::string spec = path + c.suffix;
  // The message names the file part of the spec, not the ":name" part.
  const bool named = c.suffix.starts_with(":");
  expect_clean_error(spec, named ? path : spec, c.expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, MalformedFileTest, testing::ValuesIn(all_cases()),
                         [](const testing::TestParamInfo<Case>& info) { return info.param.name; });

TEST(MalformedFileTest, CoversAtLeastTwentyCases) { EXPECT_GE(all_cases().size(), 20u); }

TEST(MalformedFileTest, DirectoryIsNotAFile) {
  test::TempDir dir;
  std::filesystem::create_directory(dir.file("d.npy"));
  expect_clean_error(dir.file("d.npy"), dir.file("d.npy"), "not a regular file");
}

// Every prefix of a valid file is a truncated file.
TEST(MalformedFileTest, EveryTruncationIsRejected) {
  test::TempDir dir;
  const std::string npy = npy_file(kGood, kData);
  const std::string st = safetensors_file("{" + kQ + "," + kV + "}", kStData);
  for (std::size_t length = 0; length < npy.size(); ++length) {
    test::write_bytes(dir.file("t.npy"), npy.substr(0, length));
    EXPECT_THROW(read_tensor(dir.file("t.npy")), InputError) << length;
  }
  for (std::size_t length = 0; length < st.size(); ++length) {
    test::write_bytes(dir.file("t.safetensors"), st.substr(0, length));
    EXPECT_THROW(read_tensor(dir.file("t.safetensors:v")), InputError) << length;
  }
}

// Flipping any bit of the header either leaves a loadable file or gives InputError,
// never another exception or a crash.
TEST(MalformedFileTest, BitFlipsLoadOrFailCleanly) {
  test::TempDir dir;
  const std::string npy = npy_file(kGood, kData);
  const std::string st = safetensors_file("{" + kQ + "," + kV + "}", kStData);
  const struct {
    std::string name;
    std::string bytes;
    std::size_t header_end;
  } files[] = {{"f.npy", npy, npy.size() - kData.size()},
               {"f.safetensors:q", st, st.size() - kStData.size()}};
  for (const auto& file : files) {
    const std::string path = dir.file(file.name.substr(0, file.name.find(':')));
    const std::string spec = dir.file(file.name);
    for (std::size_t at = 0; at < file.header_end; ++at) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string bytes = file.bytes;
        bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
        test::write_bytes(path, bytes);
        try {
          read_tensor(spec);
        } catch (const InputError& error) {
          EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos) << error.what();
        }
      }
    }
  }
}

// Q, K and V that load fine but do not fit together.
TEST(MalformedFileTest, MismatchedQkvNameTheFile) {
  const std::array<std::string, 3> names = {"q.npy", "k.npy", "v.npy"};
  const auto zeros = [](DType dtype, std::vector<std::int64_t> shape) {
    return Tensor::zeros(dtype, std::move(shape));
  };
  const Tensor q = zeros(DType::kF32, {2, 4, 32, 16});
  const struct {
    Tensor k, v;
    std::string file, expected;
  } cases[] = {
      {zeros(DType::kF32, {4, 32, 16}), q, "k.npy",
       "layout bhnd [batch, heads, N, d] needs a 4-d tensor, got shape [4, 32, 16]"},
      {zeros(DType::kF16, {2, 4, 32, 16}), q, "k.npy", "dtype f16 does not match 'q.npy' (f32)"},
      {q, zeros(DType::kBF16, {2, 4, 32, 16}), "v.npy", "dtype bf16 does not match 'q.npy' (f32)"},
      {zeros(DType::kF32, {1, 4, 32, 16}), q, "k.npy", "batch 1 does not match 'q.npy' (2)"},
      {zeros(DType::kF32, {2, 2, 32, 16}), q, "k.npy", "heads 2 does not match 'q.npy' (4)"},
      {q, zeros(DType::kF32, {2, 8, 32, 16}), "v.npy", "heads 8 does not match 'q.npy' (4)"},
      {zeros(DType::kF32, {2, 4, 32, 8}), q, "k.npy", "head dim 8 does not match 'q.npy' (16)"},
      {q, zeros(DType::kF32, {2, 4, 31, 16}), "v.npy",
       "sequence length 31 does not match 'k.npy' (32)"},
  };
  for (const auto& c : cases) {
    try {
      check_qkv(q, c.k, c.v, Layout::kBHND, names);
      ADD_FAILURE() << "accepted: " << c.expected;
    } catch (const InputError& error) {
      const std::string message = error.what();
      EXPECT_EQ(message.rfind("'" + c.file + "': ", 0), 0u) << message;
      EXPECT_NE(message.find(c.expected), std::string::npos) << message;
    }
  }
}

TEST(MalformedFileTest, ViewsRejectWhatTheyCannotExpress) {
  // The strided views name the file and the layout they were asked for.
  const Tensor bnhd = Tensor::zeros(DType::kF32, {2, 8, 4, 16});
  const detail::LayoutAxes axes = detail::layout_axes(bnhd.shape, {}, Layout::kBNHD, "q.npy");
  EXPECT_FALSE(detail::batch_folds(axes));
  try {
    detail::layout_axes(bnhd.shape, {}, Layout::kHND, "q.npy");
    ADD_FAILURE() << "a 4-d tensor read as hnd";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("q.npy: layout hnd [heads, N, d] needs a 3-d tensor", 0),
              0u)
        << e.what();
  }
}

}  // namespace
}  // namespace tilesplash
