#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

#include "cli_runner.h"
#include "tools/output_files.h"

// Runs the built `kiln` binary as a user would (KILN_BINARY, set by meson);
// kiln_cli("run ...") is `kiln run ...` from the source root.

#include <sys/stat.h>
#include <sys/wait.h>
#include <zlib.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#if KILN_HAVE_ONNX
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>
#endif

namespace {

using cli_test::has;
using cli_test::Result;
using cli_test::source_root;
Result kiln_cli(const std::string& args) { return cli_test::run_kiln(args); }

}  // namespace

BOOST_AUTO_TEST_CASE(help_lists_commands_and_every_command_has_help) {
  auto r = kiln_cli("--help");
  BOOST_TEST(r.exit_code == 0);
  for (const char* command : {"devices", "run", "explain", "profile", "settings"}) {
    BOOST_TEST(has(r, command));
    auto sub = kiln_cli(std::string(command) + " --help");
    BOOST_TEST(sub.exit_code == 0);
    BOOST_TEST(has(sub, "Usage"));
  }
  BOOST_TEST(has(kiln_cli("run --help"), "--image"));
}

BOOST_AUTO_TEST_CASE(no_command_is_a_usage_error) {
  auto r = kiln_cli("");
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(has(r, "a command is required: devices, run,"));
}

// kiln cache: what the folder holds, pruning to a limit, clearing.
BOOST_AUTO_TEST_CASE(cache_command_shows_prunes_and_clears) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cli_cache_dir_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::string cache = " --cache-dir '" + dir.string() + "'";
  auto run = kiln_cli("run --model resnet18 --image-size 32 --iters 0 --image data/images/chelsea.png" + cache);
  BOOST_TEST(run.exit_code == 0, run.output);
  auto show = kiln_cli("cache show" + cache);
  BOOST_TEST(show.exit_code == 0, show.output);
  BOOST_TEST(has(show, "cache folder: " + dir.string()), show.output);
  BOOST_TEST(has(show, "  plans            1"), show.output);
  BOOST_TEST(has(show, "(a file per weight, shared by the plans that hold it)"), show.output);
  BOOST_TEST(!has(show, "  weights          0"), show.output);
  auto prune = kiln_cli("cache prune --limit 0" + cache);
  BOOST_TEST(prune.exit_code == 0, prune.output);
  BOOST_TEST(has(prune, "  kernels          0"), prune.output);
  BOOST_TEST(has(prune, "  plans            0"), prune.output);
  auto bad = kiln_cli("cache prune --limit lots" + cache);
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(has(bad, "--limit 'lots' is not a size"), bad.output);
  auto clear = kiln_cli("cache clear" + cache);
  BOOST_TEST(clear.exit_code == 0, clear.output);
  BOOST_TEST(!std::filesystem::exists(dir / "kernels"));
  std::filesystem::remove_all(dir);
}

// A mistyped command is named, with the commands there are and the nearest one.
BOOST_AUTO_TEST_CASE(a_mistyped_command_is_named_with_the_commands) {
  auto typo = kiln_cli("rnu --model resnet18");
  BOOST_TEST(typo.exit_code == 2);
  BOOST_TEST(has(typo, "'rnu' is not a kiln command (did you mean 'run'?); the commands are: devices, run,"));
  auto unknown = kiln_cli("nonexistent");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(has(unknown, "'nonexistent' is not a kiln command; the commands are:"));
  BOOST_TEST(kiln_cli("--version").exit_code == 0);
}

BOOST_AUTO_TEST_CASE(devices_lists_every_backend_with_reason_or_devices) {
  auto r = kiln_cli("devices");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "vulkan: available"));
  BOOST_TEST(has(r, "max workgroup invocations"));
  BOOST_TEST(has(r, "null: unavailable: "));
  for (const char* b : {"cuda", "hip"}) {
    // Built in here; either available with devices or unavailable with a reason.
    BOOST_TEST((has(r, std::string(b) + ": available") || has(r, std::string(b) + ": unavailable: ")));
  }
}

BOOST_AUTO_TEST_CASE(devices_json_is_machine_readable) {
  auto r = kiln_cli("devices --json");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.output.front() == '[');
  BOOST_TEST(has(r, "\"backend\": \"vulkan\""));
  BOOST_TEST(has(r, "\"available\": true"));
}

BOOST_AUTO_TEST_CASE(run_resnet18_on_a_photo) {
  auto r = kiln_cli("run --model resnet18 --image data/images/chelsea.png --image-size 64 --iters 1");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "top-5"));
  BOOST_TEST(has(r, "1. "));
  BOOST_TEST(has(r, "5. "));
  BOOST_TEST(has(r, "max |eager - compiled|"));
  BOOST_TEST(has(r, "eager"));
  BOOST_TEST(has(r, "compiled"));
  BOOST_TEST(has(r, "451x300"));
}

// --dtype runs the model's f32 tensors in 16 bits, eager and compiled alike,
// checked against each other with the type's tolerance; explain says which
// kernels hold 16-bit buffers, and the dtype setting converts inside the
// compiler with a report of what it changed.
BOOST_AUTO_TEST_CASE(run_and_explain_in_16_bits) {
  auto r = kiln_cli("run --model resnet18 --image data/images/chelsea.png --image-size 64 --iters 1 --dtype f16");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "max |eager - compiled|"));
  BOOST_TEST(!has(r, "WARNING"));
  auto e = kiln_cli("explain --model resnet18 --image-size 32 --dtype bf16");
  BOOST_TEST(e.exit_code == 0);
  BOOST_TEST(has(e, "bf16 buffers, f32 arithmetic"));
  BOOST_TEST(has(e, "-> bf16["));
  auto s = kiln_cli("explain --model resnet18 --image-size 32 --set dtype=f16");
  BOOST_TEST(s.exit_code == 0);
  BOOST_TEST(has(s, "convert_float_type"));
  BOOST_TEST(has(s, "f32 constants (weights) converted to f16 once"));
  BOOST_TEST(has(s, "input 'input': inserted a Cast f32 -> f16"));
  auto bad = kiln_cli("run --model resnet18 --image-size 32 --dtype f64");
  BOOST_TEST(bad.exit_code != 0);
  BOOST_TEST(has(bad, "--dtype"));
}

BOOST_AUTO_TEST_CASE(run_reduce_overhead_mode) {
  auto r = kiln_cli("run --image data/images/coffee.png --image-size 32 --iters 2 --mode reduce-overhead --top 3");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "reduce-overhead"));
  BOOST_TEST(has(r, "3. "));
}

BOOST_AUTO_TEST_CASE(user_errors_exit_2_with_a_clear_message) {
  auto missing = kiln_cli("run --image no/such/file.png --image-size 32");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(has(missing, "no/such/file.png"));

  auto not_image = kiln_cli("run --image meson.build --image-size 32");
  BOOST_TEST(not_image.exit_code == 2);
  BOOST_TEST(has(not_image, "meson.build' is not a PNG, JPEG, BMP or binary PPM/PGM file"));

  auto backend = kiln_cli("run --backend metal --image-size 32");
  BOOST_TEST(backend.exit_code == 2);
  BOOST_TEST(has(backend, "unknown backend 'metal'"));

  auto model = kiln_cli("run --model resnet9000 --image-size 32");
  BOOST_TEST(model.exit_code == 2);
  BOOST_TEST(has(model, "resnet18"));

  auto autotune = kiln_cli("run --mode max-autotune --image-size 32 --set tune_budget=soon");
  BOOST_TEST(autotune.exit_code == 2);
  BOOST_TEST(has(autotune, "'tune_budget'='soon' is not valid"));

  auto bad_option = kiln_cli("run --image-size -5");
  BOOST_TEST(bad_option.exit_code != 0);
}

// ---- hostile inputs: images, output folders, file names ---------------------------------

namespace {

std::uint32_t crc32(std::string_view bytes) {
  std::uint32_t crc = 0xffffffffu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((v >> shift) & 0xffu);
}

void png_chunk(std::string& png, const std::string& type, const std::string& data) {
  put_u32(png, static_cast<std::uint32_t>(data.size()));
  const std::string body = type + data;
  png += body;
  put_u32(png, crc32(body));
}

// An 8-bit greyscale PNG of zeros, its pixels stored uncompressed (deflate
// stored blocks), or only its header when `header_only` (nothing to decode).
std::string grey_png(std::uint32_t width, std::uint32_t height, bool header_only) {
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_u32(ihdr, width);
  put_u32(ihdr, height);
  ihdr += std::string("\x08\x00\x00\x00\x00", 5);  // depth 8, greyscale, deflate, no filter, no interlace
  png_chunk(png, "IHDR", ihdr);
  if (header_only) return png;
  const std::string raw(static_cast<std::size_t>(height) * (width + 1), '\0');  // a filter byte per row, then zeros
  std::string zlib = "\x78\x01";
  for (std::size_t at = 0; at < raw.size(); at += 65535) {
    const std::size_t n = std::min<std::size_t>(65535, raw.size() - at);
    zlib += static_cast<char>(at + n == raw.size() ? 1 : 0);
    zlib += static_cast<char>(n & 0xff);
    zlib += static_cast<char>(n >> 8);
    zlib += static_cast<char>(~n & 0xff);
    zlib += static_cast<char>((~n >> 8) & 0xff);
    zlib += raw.substr(at, n);
  }
  // Adler-32 of all zeros: a = 1, b = length.
  put_u32(zlib, static_cast<std::uint32_t>(((raw.size() % 65521) << 16) | 1u));
  png_chunk(png, "IDAT", zlib);
  png_chunk(png, "IEND", "");
  return png;
}

// A PNG with this IHDR and these bytes as its pixel data, deflated (zlib):
// `raw` may hold far more than the header's size needs.
// `alter`, when given, changes the compressed stream before it is stored.
std::string png_with_pixels(std::uint32_t width, std::uint32_t height, const std::string& raw,
                            const std::string& chunk_before_pixels = "",
                            const std::function<void(std::string&)>& alter = {}) {
  std::string png = "\x89PNG\r\n\x1a\n";
  std::string ihdr;
  put_u32(ihdr, width);
  put_u32(ihdr, height);
  ihdr += std::string("\x08\x00\x00\x00\x00", 5);
  png_chunk(png, "IHDR", ihdr);
  if (!chunk_before_pixels.empty()) png_chunk(png, chunk_before_pixels, "");
  uLongf size = compressBound(static_cast<uLong>(raw.size()));
  std::string zlib(size, '\0');
  BOOST_REQUIRE(compress2(reinterpret_cast<Bytef*>(zlib.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                          static_cast<uLong>(raw.size()), 9) == Z_OK);
  zlib.resize(size);
  if (alter) alter(zlib);
  png_chunk(png, "IDAT", zlib);
  png_chunk(png, "IEND", "");
  return png;
}

std::filesystem::path fresh_folder(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cli_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

BOOST_AUTO_TEST_CASE(run_refuses_an_oversized_image_before_decoding_it) {
  const auto dir = fresh_folder("big_image");
  // 4,000,000 x 1: a few dozen bytes of header that would decode to gigabytes.
  std::ofstream(dir / "wide.png", std::ios::binary) << grey_png(4'000'000, 1, true);
  auto wide = kiln_cli("run --image '" + (dir / "wide.png").string() + "' --image-size 32 --iters 0");
  BOOST_TEST(wide.exit_code == 2);
  BOOST_TEST(has(wide, "wide.png' is 4000000x1 pixels, larger than kiln's limit of 67108864 pixels and 32768 a side"));
  BOOST_TEST(!has(wide, "kiln run:"));  // nothing ran

  // Within the limits, but the resize for the centre crop would be 73 x 2.4M pixels.
  std::ofstream(dir / "tall.png", std::ios::binary) << grey_png(1, 32768, false);
  auto tall = kiln_cli("run --image '" + (dir / "tall.png").string() + "' --image-size 64 --iters 0");
  BOOST_TEST(tall.exit_code == 2);
  BOOST_TEST(has(tall, "tall.png' (1x32768) would be resized to 73x2392064 pixels"));

  // A small image made the same way decodes and runs.
  std::ofstream(dir / "small.png", std::ios::binary) << grey_png(40, 30, false);
  auto small = kiln_cli("run --image '" + (dir / "small.png").string() + "' --image-size 32 --iters 0");
  BOOST_TEST(small.exit_code == 0);
  BOOST_TEST(has(small, "(40x30, 1 channels)"));

  auto help = kiln_cli("run --help");
  BOOST_TEST(has(help, "67108864 pixels"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(run_reads_only_the_image_formats_it_documents_and_escapes_their_bytes) {
  const auto dir = fresh_folder("image_formats");
  const auto run_on = [&](const std::filesystem::path& image) {
    return kiln_cli("run --image '" + image.string() + "' --image-size 32 --iters 0");
  };
  struct Refused {
    std::string file, bytes, message;
  };
  const std::vector<Refused> refused = {
      // Sizes of zero or less (stb_image reads them as 0x0).
      {"zero.ppm", "P6\n0 0\n255\n", "has no pixels: its header says 0x0"},
      {"negative.ppm", "P6\n-4 2\n255\n", "has no pixels"},
      // Formats stb_image decodes but kiln neither documents nor fuzzes:
      // Photoshop, Radiance HDR, Softimage PIC, TGA (no signature at all).
      {"layers.psd", std::string("8BPS\x00\x01", 6) + std::string(20, '\0'), "is not a PNG, JPEG, BMP or binary PPM/PGM file"},
      {"light.hdr", "#?RADIANCE\nFORMAT=32-bit_rle_rgbe\n\n-Y 0 +X 0\n", "is not a PNG, JPEG, BMP or binary PPM/PGM file"},
      {"soft.pic", std::string("\x53\x80\xf6\x34", 4) + std::string(176, 'P'), "is not a PNG, JPEG, BMP or binary PPM/PGM file"},
      {"image.tga", std::string("\x00\x00\x02", 3) + std::string(15, '\0'), "is not a PNG, JPEG, BMP or binary PPM/PGM file"},
      // Found by fuzz_image: 16-bit samples that stb_image read past the end
      // of the data (a crash), and 8-bit pixels the file does not hold.
      {"deep.pgm", "P5 1\n28143\n666>6666-6=66666 6666", "a PPM/PGM with samples up to 666"},
      {"short.ppm", "P6\n# a comment\n4 4\n255\n" + std::string(40, 'x'), "its 4x4 pixels need 48 bytes, the file holds 40"},
      // Found by fuzz_image: a compressed stream that never ends, which
      // stb_image decoded from zeros past the data until memory ran out; and
      // damaged compressed data.
      {"unended.png", png_with_pixels(5, 3, std::string(18, '\0'), "", [](std::string& z) { z.resize(z.size() - 4); }),
       "its PNG pixel data ends before its compressed stream does"},
      {"damaged.png", png_with_pixels(5, 3, std::string(18, '\0'), "", [](std::string& z) { z[2] = '\xff'; }),
       "its PNG pixel data is damaged (zlib: "},
      // Found by fuzz_image: a second IDAT chunk, after the whole pixel data,
      // claiming a gigabyte, which stb_image allocated before reading it
      // (the PNG without its IEND, then that chunk's header and 4 bytes).
      {"huge_chunk.png", [&] {
         const std::string png = png_with_pixels(5, 3, std::string(18, '\0'));
         return png.substr(0, png.size() - 12) + std::string("\x42\x00\x00\x00IDATabcd", 12);
       }(),
       "its PNG chunk at byte"},
      // The same with the chunk's header alone at the end of the file.
      {"huge_chunk_header.png", [&] {
         const std::string png = png_with_pixels(5, 3, std::string(18, '\0'));
         return png.substr(0, png.size() - 12) + std::string("\x7f\xb8\xba\xb1IDAT\x82", 9);
       }(),
       "its PNG chunk at byte"},
      // 16x16 pixels whose data inflates to 64 MiB: refused before stb_image
      // would hold it all.
      {"bomb.png", png_with_pixels(16, 16, std::string(std::size_t{64} << 20, '\0')),
       "its pixel data inflates past the 2240 bytes a 16x16 PNG can hold"},
  };
  for (const Refused& r : refused) {
    BOOST_TEST_CONTEXT(r.file) {
      std::ofstream(dir / r.file, std::ios::binary) << r.bytes;
      const auto result = run_on(dir / r.file);
      BOOST_TEST(result.exit_code == 2);
      BOOST_TEST(has(result, r.message), result.output);
      BOOST_TEST(!has(result, "kiln run:"));
    }
  }

  // A critical chunk named ESC [ 2 J (a terminal's "clear the screen"):
  // stb_image names it in its reason, which kiln prints escaped.
  std::ofstream(dir / "escape.png", std::ios::binary) << png_with_pixels(4, 4, std::string(20, '\0'), "\x1b[2J");
  const auto escaped = run_on(dir / "escape.png");
  BOOST_TEST(escaped.exit_code == 2);
  BOOST_TEST(has(escaped, "\\x1b[2J PNG chunk not known"), escaped.output);
  BOOST_TEST(escaped.output.find('\x1b') == std::string::npos);

  // What is not a regular file is named, not "no such file".
  BOOST_REQUIRE(::mkfifo((dir / "pipe.png").c_str(), 0600) == 0);
  BOOST_TEST(has(run_on(dir / "pipe.png"), "it is a FIFO, not an image file"));
  std::filesystem::create_directory(dir / "folder.png");
  BOOST_TEST(has(run_on(dir / "folder.png"), "it is a directory, not an image file"));
  BOOST_TEST(has(run_on(dir / "missing.png"), "No such file or directory"));

  // The same PNG with its pixels as the header says decodes and runs.
  std::ofstream(dir / "fine.png", std::ios::binary) << png_with_pixels(16, 16, std::string(16 * 17, '\0'));
  const auto fine = run_on(dir / "fine.png");
  BOOST_TEST(fine.exit_code == 0, fine.output);
  BOOST_TEST(has(fine, "(16x16, 1 channels)"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(an_unusable_output_folder_is_an_io_error_before_anything_runs) {
  const auto dir = fresh_folder("bad_output");
  std::ofstream(dir / "a_file") << "not a folder";
  auto file = kiln_cli("run --image-size 32 --iters 0 --output-dir '" + (dir / "a_file").string() + "'");
  BOOST_TEST(file.exit_code == 2);
  BOOST_TEST(has(file, "cannot use '" + (dir / "a_file").string() + "' as the output folder"));
  BOOST_TEST(!has(file, "kiln run:"));
  auto below_file = kiln_cli("run --image-size 32 --iters 0 --output-dir '" + (dir / "a_file" / "out").string() + "'");
  BOOST_TEST(below_file.exit_code == 2);
  BOOST_TEST(has(below_file, "cannot create the output folder"));
  // A folder in which nothing can be created, even by root.
  auto unwritable = kiln_cli("run --image-size 32 --iters 0 --output-dir /proc/self");
  BOOST_TEST(unwritable.exit_code == 2);
  BOOST_TEST(has(unwritable, "cannot write in the output folder '/proc/self'"));
  BOOST_TEST(!has(unwritable, "kiln run:"));
  // A new folder (and its parents) is created.
  auto created = kiln_cli("run --image-size 32 --iters 0 --output-dir '" + (dir / "new" / "deeper").string() + "'");
  BOOST_TEST(created.exit_code == 0);
  BOOST_TEST(std::filesystem::exists(dir / "new" / "deeper" / "logits.npy"));
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(pictures_go_to_the_working_folder_without_output_dir_and_their_path_is_printed) {
  const auto dir = fresh_folder("pictures");
  const std::string image = source_root() + "/data/images/chelsea.png";
  auto r = cli_test::run_kiln("run --model segformer_b0 --image-size 32 --iters 0 --image '" + image + "'", dir.string());
  BOOST_TEST(r.exit_code == 0);
  const auto mask = std::filesystem::canonical(dir) / "segformer_b0_mask.png";
  BOOST_TEST(has(r, "mask written to " + mask.string() + " (VOC colour map)"));
  BOOST_TEST(std::filesystem::file_size(mask) > 0u);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
  BOOST_TEST(files == 1u);  // no temporary left behind
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(file_names_from_output_names_are_safe_distinct_and_deterministic) {
  using kiln::tools::distinct_file_names;
  using kiln::tools::file_stem_for;
  BOOST_TEST(file_stem_for("a/b") == "a_b");
  BOOST_TEST(file_stem_for("../../etc/passwd") == "_.._.._etc_passwd");
  BOOST_TEST(file_stem_for("") == "_");
  BOOST_TEST(file_stem_for(std::string(5000, 'x')).size() == kiln::tools::kMaxFileStemBytes);
  const std::vector<std::string> files = distinct_file_names({"a/b", "a:b", "a_b_2", "a b", "y"}, ".npy");
  BOOST_TEST(files == (std::vector<std::string>{"a_b.npy", "a_b_2.npy", "a_b_2_2.npy", "a_b_3.npy", "y.npy"}),
             boost::test_tools::per_element());
  BOOST_TEST(distinct_file_names({"a/b", "a:b", "a_b_2", "a b", "y"}, ".npy") == files, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(explain_shows_kernels_and_memory_plan) {
  auto r = kiln_cli("explain --model resnet18 --image-size 32");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "kernel"));
  BOOST_TEST(has(r, "memory:"));
  BOOST_TEST(has(r, "fc"));
}

BOOST_AUTO_TEST_CASE(explain_shows_each_setting_and_where_it_came_from) {
  auto r = cli_test::run_kiln_env("KILN_FUSE=off", "explain --model resnet18 --image-size 32 --mode reduce-overhead --set winograd=off");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "settings (value, then where it came from)"));
  BOOST_TEST(has(r, "CompileOptions::settings"));  // --set winograd=off
  BOOST_TEST(has(r, "KILN_FUSE=off"));
  BOOST_TEST(has(r, "mode reduce-overhead"));      // replay
  BOOST_TEST(has(r, "off: setting winograd=off"));  // the pass says why it did nothing
  auto table = kiln_cli("settings --mode max-autotune");
  BOOST_TEST(table.exit_code == 0);
  BOOST_TEST(has(table, "autotune = on  [mode max-autotune]"));
  BOOST_TEST(has(table, "KILN_TUNE_BUDGET"));
  auto bad = kiln_cli("explain --model resnet18 --image-size 32 --set winograd=sometimes");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(has(bad, "'winograd'='sometimes' is not valid (on or off)"));
  auto unknown = kiln_cli("settings --set no_such_setting=1");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(has(unknown, "unknown setting 'no_such_setting'"));
}

BOOST_AUTO_TEST_CASE(profile_lists_kernels_by_time_and_family) {
  auto r = kiln_cli("profile --model resnet18 --image-size 32 --calls 1 --top 1000");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "dispatches"));
  BOOST_TEST(has(r, "by kernel family"));
  BOOST_TEST(has(r, "conv2d"));
  BOOST_TEST(has(r, "layer1.0.conv1"));
  auto e = kiln_cli("profile --eager --model resnet18 --image-size 32 --calls 1");
  BOOST_TEST(e.exit_code == 0);
  BOOST_TEST(has(e, "eager mode"));
  BOOST_TEST(has(e, "batch_norm"));
  auto bad = kiln_cli("profile --model resnet18 --calls 0");
  BOOST_TEST(bad.exit_code != 0);
}

BOOST_AUTO_TEST_CASE(check_compares_backends_kernel_by_kernel) {
  // Two independent compilers (Vulkan's and the system C compiler) agree on
  // every kernel's output, matched by the value it writes.
  auto both = kiln_cli("check --model resnet18 --image-size 32 --backends vulkan,cpu");
  BOOST_TEST(both.exit_code == 0, both.output);
  BOOST_TEST(has(both, "vulkan against cpu"));
  BOOST_TEST(has(both, "every compared kernel agrees within the tolerance"));
  BOOST_TEST(has(both, "0 without a counterpart on cpu"));
  // Against the reference, every kernel's output in eager mode, listed.
  auto eager = kiln_cli("check --eager --all --model mobilenet_v2 --image-size 32 --backends reference,vulkan");
  BOOST_TEST(eager.exit_code == 0, eager.output);
  BOOST_TEST(has(eager, "vulkan against reference"));
  BOOST_TEST(has(eager, "batch_norm"));
  // With no tolerance the first convolution already differs from the
  // reference's (another summation order): it is named with its nodes.
  auto strict = kiln_cli("check --model resnet18 --image-size 32 --backends vulkan,reference --tolerance 0");
  BOOST_TEST(strict.exit_code == 1, strict.output);
  BOOST_TEST(has(strict, "first kernel that differs: 'conv2d"), strict.output);
  BOOST_TEST(has(strict, "fused nodes: conv1"), strict.output);
  auto one = kiln_cli("check --model resnet18 --backends vulkan");
  BOOST_TEST(one.exit_code == 2);
  BOOST_TEST(has(one, "--backends takes two different names"));
}

// ---- ONNX models with .npy inputs and outputs ------------------------------------------

#if KILN_HAVE_ONNX
namespace {

// A format 1.0 .npy file of little-endian float32 values.
std::string npy_f32(const std::vector<std::int64_t>& shape, const std::vector<float>& values) {
  std::string dims;
  for (auto d : shape) dims += std::to_string(d) + ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  return out;
}

// The float32 values of a .npy file kiln wrote (after its header).
std::vector<float> npy_values(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_REQUIRE(bytes.size() > 10 && bytes.compare(0, 6, "\x93NUMPY") == 0);
  const std::size_t header = static_cast<unsigned char>(bytes[8]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
  BOOST_TEST(bytes.find("'descr': '<f4'") != std::string::npos);
  std::vector<float> values((bytes.size() - 10 - header) / sizeof(float));
  if (!values.empty()) std::memcpy(values.data(), bytes.data() + 10 + header, values.size() * sizeof(float));
  return values;
}

// y = Relu(x) + bias, x f32[1, 4], written as an ONNX file.
void write_relu_bias_model(const std::filesystem::path& path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("relu_bias");
  auto* in = g->add_input();
  in->set_name("x");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(1);
  in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(4);
  auto* bias = g->add_initializer();
  bias->set_name("bias");
  bias->set_data_type(onnx::TensorProto_DataType_FLOAT);
  bias->add_dims(4);
  for (float v : {0.5f, 1.0f, 1.5f, 2.0f}) bias->add_float_data(v);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("x");
  relu->add_output("r");
  auto* add = g->add_node();
  add->set_op_type("Add");
  add->set_name("add");
  add->add_input("r");
  add->add_input("bias");
  add->add_output("out/y");
  g->add_output()->set_name("out/y");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

// The relu_bias model with two outputs whose names give the same file name:
// "a/b" = Relu(x), "a:b" = Relu(x) + bias.
void write_clashing_outputs_model(const std::filesystem::path& path) {
  onnx::ModelProto model;
  {
    std::ifstream in(path.parent_path() / "model.onnx", std::ios::binary);
    BOOST_REQUIRE(model.ParseFromIstream(&in));
  }
  auto* g = model.mutable_graph();
  g->mutable_node(0)->set_output(0, "a/b");
  g->mutable_node(1)->set_input(0, "a/b");
  g->mutable_node(1)->set_output(0, "a:b");
  g->clear_output();
  g->add_output()->set_name("a/b");
  g->add_output()->set_name("a:b");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

// GlobalAveragePool of an f32[1, 3, 32, 32] image input, written as an ONNX file.
void write_image_pool_model(const std::filesystem::path& path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* g = model.mutable_graph();
  auto* in = g->add_input();
  in->set_name("image");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  for (std::int64_t d : {std::int64_t{-1}, std::int64_t{3}, std::int64_t{32}, std::int64_t{32}}) {
    auto* dim = in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim();
    if (d < 0) dim->set_dim_param("batch");
    else dim->set_dim_value(d);
  }
  auto* pool = g->add_node();
  pool->set_op_type("GlobalAveragePool");
  pool->set_name("pool");
  pool->add_input("image");
  pool->add_output("mean");
  g->add_output()->set_name("mean");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

// Relu of an f32[1, 3, 24, 40] image input (a wide, non-square detector input).
void write_image_echo_model(const std::filesystem::path& path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  auto* in = g->add_input();
  in->set_name("images");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  for (std::int64_t d : {1, 3, 24, 40}) in->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("echo");
  relu->add_input("images");
  relu->add_output("pixels");
  g->add_output()->set_name("pixels");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

}  // namespace

// --preprocess: letterbox pads a wide photograph's sides with grey 114 and
// scales to [0, 1]; unit stretches it to the input; --mean and --std
// normalise; each run prints what it applied.
BOOST_AUTO_TEST_CASE(run_prepares_the_image_as_asked_and_says_how) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cli_prep_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_image_echo_model(dir / "echo.onnx");
  const std::string model = "'" + (dir / "echo.onnx").string() + "' --image data/images/chelsea.png --iters 0";
  // chelsea.png is 451x300: scaled by 24/300 to 36x24, two grey columns each side.
  auto letterbox = kiln_cli("run " + model + " --preprocess letterbox --output-dir '" + (dir / "letterbox").string() + "'");
  BOOST_TEST(letterbox.exit_code == 0, letterbox.output);
  BOOST_TEST(has(letterbox, "preprocessing: letterbox: resized to fit 40x24 keeping its aspect ratio, padded with grey (114), "
                            "scaled to [0, 1] (--preprocess, --mean, --std)"), letterbox.output);
  const std::vector<float> boxed = npy_values((dir / "letterbox" / "pixels.npy").string());
  BOOST_TEST_REQUIRE(boxed.size() == 3u * 24 * 40);
  for (std::size_t at : {std::size_t{0}, std::size_t{1}, std::size_t{38}, std::size_t{39}, std::size_t{2 * 960 + 23 * 40 + 39}})
    BOOST_TEST(boxed[at] == 114.0f / 255.0f, "pixel " << at);
  BOOST_TEST(boxed[12 * 40 + 20] != 114.0f / 255.0f);
  auto unit = kiln_cli("run " + model + " --preprocess unit --mean 0.5,0.5,0.5 --std 0.5,0.5,0.5 --output-dir '" +
                       (dir / "unit").string() + "'");
  BOOST_TEST(unit.exit_code == 0, unit.output);
  BOOST_TEST(has(unit, "preprocessing: unit: resized to 40x24, scaled to [0, 1], normalised by mean (0.5, 0.5, 0.5) "
                       "and std (0.5, 0.5, 0.5)"), unit.output);
  const std::vector<float> stretched = npy_values((dir / "unit" / "pixels.npy").string());
  BOOST_TEST(*std::max_element(stretched.begin(), stretched.end()) <= 1.0f);
  BOOST_TEST(*std::min_element(stretched.begin(), stretched.end()) >= 0.0f);  // Relu of [-1, 1]
  auto bad_mean = kiln_cli("run " + model + " --mean 0.5,0.5");
  BOOST_TEST(bad_mean.exit_code == 2);
  BOOST_TEST(has(bad_mean, "--mean takes three comma-separated numbers (R,G,B), got '0.5,0.5'"), bad_mean.output);
  auto zero_std = kiln_cli("run " + model + " --std 1,0,1");
  BOOST_TEST(zero_std.exit_code == 2);
  BOOST_TEST(has(zero_std, "divides by zero"), zero_std.output);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(run_onnx_model_on_an_image_sized_from_its_input) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cli_image_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_image_pool_model(dir / "pool.onnx");
  // The symbolic batch dim takes --batch.
  auto r = kiln_cli("run '" + (dir / "pool.onnx").string() + "' --image data/images/chelsea.png --batch 2 --iters 0");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "batch 2"));
  BOOST_TEST(has(r, "as a 32x32 input"));
  BOOST_TEST(has(r, "preprocessing: imagenet: shorter side resized to 256/224 of the input, centre 32x32 crop"));
  BOOST_TEST(has(r, "mean: f32[2, 3, 1, 1]"));
  BOOST_TEST(!has(r, "top-5"));  // not a classification model
  // A .npy input may have any extent where the model's dim is symbolic, and
  // only there.
  std::ofstream(dir / "three.npy", std::ios::binary) << npy_f32({3, 3, 32, 32}, std::vector<float>(3 * 3 * 32 * 32, 0.5f));
  auto three = kiln_cli("run '" + (dir / "pool.onnx").string() + "' --input image='" + (dir / "three.npy").string() +
                        "' --iters 0");
  BOOST_TEST(three.exit_code == 0, three.output);
  BOOST_TEST(has(three, "mean: f32[3, 3, 1, 1]"), three.output);
  std::ofstream(dir / "small.npy", std::ios::binary) << npy_f32({1, 3, 16, 16}, std::vector<float>(3 * 16 * 16, 0.5f));
  auto small = kiln_cli("run '" + (dir / "pool.onnx").string() + "' --input image='" + (dir / "small.npy").string() +
                        "' --iters 0");
  BOOST_TEST(small.exit_code == 2);
  BOOST_TEST(has(small, "(dims 0 symbolic: batch)"), small.output);
  BOOST_TEST(has(small, "f32[1, 3, 16, 16]"), small.output);
  std::filesystem::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(run_onnx_model_with_npy_input_and_output_dir) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cli_onnx_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_relu_bias_model(dir / "model.onnx");
  std::ofstream(dir / "x.npy", std::ios::binary) << npy_f32({1, 4}, {-1.0f, 2.0f, -3.0f, 4.0f});

  auto r = kiln_cli("run '" + (dir / "model.onnx").string() + "' --input x='" + (dir / "x.npy").string() +
                "' --output-dir '" + (dir / "out").string() + "' --iters 0");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "out/y"));
  BOOST_TEST(has(r, "max |eager - compiled|"));
  // '/' in the output name becomes '_' in the file name.
  const auto written = dir / "out" / "out_y.npy";
  BOOST_REQUIRE(std::filesystem::exists(written));
  BOOST_TEST(npy_values(written.string()) == (std::vector<float>{0.5f, 3.0f, 1.5f, 6.0f}), boost::test_tools::per_element());

  // Two outputs whose names sanitise to the same file: the second gets _2, and
  // the mapping is printed; neither overwrites the other.
  write_clashing_outputs_model(dir / "clash.onnx");
  auto clash = kiln_cli("run '" + (dir / "clash.onnx").string() + "' --input x='" + (dir / "x.npy").string() +
                    "' --output-dir '" + (dir / "clash").string() + "' --iters 0");
  BOOST_TEST(clash.exit_code == 0);
  BOOST_TEST(has(clash, "a_b.npy (f32[1, 4]) for output 'a/b'"));
  BOOST_TEST(has(clash, "a_b_2.npy (f32[1, 4]) for output 'a:b'"));
  BOOST_TEST(npy_values((dir / "clash" / "a_b.npy").string()) == (std::vector<float>{0.0f, 2.0f, 0.0f, 4.0f}),
             boost::test_tools::per_element());
  BOOST_TEST(npy_values((dir / "clash" / "a_b_2.npy").string()) == (std::vector<float>{0.5f, 3.0f, 1.5f, 6.0f}),
             boost::test_tools::per_element());

  // A .npy whose shape does not fit the input is a user error naming both shapes.
  std::ofstream(dir / "bad.npy", std::ios::binary) << npy_f32({2, 2}, {1, 2, 3, 4});
  auto bad = kiln_cli("run '" + (dir / "model.onnx").string() + "' --input x='" + (dir / "bad.npy").string() + "' --iters 0");
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(has(bad, "f32[1, 4]"));
  BOOST_TEST(has(bad, "f32[2, 2]"));
  auto unknown = kiln_cli("run '" + (dir / "model.onnx").string() + "' --input z='" + (dir / "x.npy").string() + "' --iters 0");
  BOOST_TEST(unknown.exit_code == 2);
  BOOST_TEST(has(unknown, "its inputs: x"));
  // float64 (NumPy's default) is refused with the fix in the message.
  std::string f8 = npy_f32({1, 4}, {1, 2, 3, 4});
  f8.replace(f8.find("<f4"), 3, "<f8");
  std::ofstream(dir / "f8.npy", std::ios::binary) << f8;
  auto wrong_dtype = kiln_cli("run '" + (dir / "model.onnx").string() + "' --input x='" + (dir / "f8.npy").string() + "' --iters 0");
  BOOST_TEST(wrong_dtype.exit_code == 2);
  BOOST_TEST(has(wrong_dtype, "astype(np.float32)"));
  // A truncated file names itself and the sizes.
  const std::string full = npy_f32({1, 4}, {1, 2, 3, 4});
  std::ofstream(dir / "short.npy", std::ios::binary) << full.substr(0, full.size() - 4);
  auto truncated = kiln_cli("run '" + (dir / "model.onnx").string() + "' --input x='" + (dir / "short.npy").string() + "' --iters 0");
  BOOST_TEST(truncated.exit_code == 2);
  BOOST_TEST(has(truncated, "short.npy"));
  std::filesystem::remove_all(dir);
}

namespace {

// A decoder step's shape: past [1, 2, past, 4] and new [1, 2, seq, 4] in;
// present = Concat(past, new) along axis 2, past_relu = Relu(past), and
// block = Reshape(new, [1, 2, 3, 4]), which folds only when seq is 3: at
// the placeholder extent 1 import fails.
void write_cache_step_model(const std::filesystem::path& path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  auto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(13);
  auto* g = model.mutable_graph();
  g->set_name("cache_step");
  for (const char* name : {"past", "new"}) {
    auto* in = g->add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
    auto* shape = in->mutable_type()->mutable_tensor_type()->mutable_shape();
    shape->add_dim()->set_dim_value(1);
    shape->add_dim()->set_dim_value(2);
    shape->add_dim()->set_dim_param(std::string(name) == "past" ? "past_sequence" : "sequence");
    shape->add_dim()->set_dim_value(4);
  }
  auto* to = g->add_initializer();
  to->set_name("to");
  to->set_data_type(onnx::TensorProto_DataType_INT64);
  to->add_dims(4);
  for (std::int64_t v : {1, 2, 3, 4}) to->add_int64_data(v);
  auto node = [&](const char* op, std::vector<std::string> inputs, const char* output) {
    auto* n = g->add_node();
    n->set_op_type(op);
    n->set_name(output);
    for (const auto& i : inputs) n->add_input(i);
    n->add_output(output);
    g->add_output()->set_name(output);
    return n;
  };
  auto* concat = node("Concat", {"past", "new"}, "present");
  auto* axis = concat->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto_AttributeType_INT);
  axis->set_i(2);
  node("Relu", {"past"}, "past_relu");
  node("Reshape", {"new", "to"}, "block");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

}  // namespace

// `kiln run --input` imports a model at its input files' shapes (here one
// whose import fails at placeholder extents), and a zero-size array (an
// empty key/value cache) goes in and comes out as .npy.
BOOST_AUTO_TEST_CASE(run_imports_at_the_input_files_shapes_and_takes_empty_arrays) {
  const auto dir = std::filesystem::temp_directory_path() / ("kiln_cli_cache_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  write_cache_step_model(dir / "step.onnx");
  std::ofstream(dir / "past.npy", std::ios::binary) << npy_f32({1, 2, 0, 4}, {});
  std::vector<float> values(24);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) - 5.0f;
  std::ofstream(dir / "new.npy", std::ios::binary) << npy_f32({1, 2, 3, 4}, values);
  const std::string model = "'" + (dir / "step.onnx").string() + "'";
  auto r = kiln_cli("run " + model + " --input past='" + (dir / "past.npy").string() + "' --input new='" +
                    (dir / "new.npy").string() + "' --output-dir '" + (dir / "out").string() + "' --iters 1");
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(has(r, "present.npy (f32[1, 2, 3, 4])"), r.output);
  BOOST_TEST(has(r, "past_relu.npy (f32[1, 2, 0, 4])"), r.output);
  BOOST_TEST(npy_values((dir / "out" / "present.npy").string()) == values, boost::test_tools::per_element());
  BOOST_TEST(npy_values((dir / "out" / "past_relu.npy").string()).empty());
  BOOST_TEST(npy_values((dir / "out" / "block.npy").string()) == values, boost::test_tools::per_element());
  // Without inputs the model has no real shapes: the placeholder's failure is
  // an error that says so and names the options.
  auto without = kiln_cli("explain " + model);
  BOOST_TEST(has(without, "placeholder extents"), without.output);
  auto bench = kiln_cli("compile " + model + " -o '" + (dir / "step.kiln").string() + "'");
  BOOST_TEST(bench.exit_code == 2, bench.output);
  BOOST_TEST(has(bench, "input 'new' dim 2 ('sequence') = 224 (OnnxOptions::image_size; kiln --image-size)"), bench.output);
  BOOST_TEST(has(bench, "--input-shape"), bench.output);
  // --input-shape imports it at the shapes given.
  auto shaped = kiln_cli("compile " + model + " --input-shape new=1x2x3x4 --input-shape past=1,2,5,4 -o '" +
                         (dir / "step.kiln").string() + "'");
  BOOST_TEST(shaped.exit_code == 0, shaped.output);
  auto malformed = kiln_cli("compile " + model + " --input-shape new=1x2xthree -o '" + (dir / "x.kiln").string() + "'");
  BOOST_TEST(malformed.exit_code == 2);
  BOOST_TEST(has(malformed, "'three' is not a dimension"), malformed.output);
  std::filesystem::remove_all(dir);
}
#endif

namespace {

// A one-record `kiln tune export` document.
std::string tuning_export(const std::string& kernel, const std::string& date) {
  return R"({"format": "kiln-tuning-db", "schema_version": 1, "records": [{
    "key": {"kernel": ")" + kernel + R"(", "template": "gemm", "template_version": 3, "backend": "vulkan",
            "device": "llvmpipe", "driver": "Mesa 22.3.6"},
    "heuristic": {"knobs": "4x4_k4", "ms": 2.0}, "winner": {"knobs": "8x4_k8", "ms": 1.0},
    "candidates": [{"knobs": "8x4_k8", "status": "ok", "detail": "", "times_ms": [1.0], "median_ms": 1.0, "spread": 0},
                   {"knobs": "16x4_k8", "status": "compile_failed", "detail": "too many registers", "times_ms": [],
                    "median_ms": 0, "spread": 0}],
    "provenance": {"date": ")" + date + R"(", "host": "h", "kiln_version": "0.1.0", "budget_s": 10}}]})";
}

}  // namespace

BOOST_AUTO_TEST_CASE(tune_database_commands_import_show_export_and_merge) {
  const auto dir = fresh_folder("tune");
  const std::string d = dir.string() + "/";
  std::ofstream(dir / "a.json") << tuning_export("gemm m=64 n=64 k=64", "2026-12-01T10:00:00Z");
  std::ofstream(dir / "b.json") << tuning_export("gemm m=128 n=128 k=128", "2026-12-01T11:00:00Z");
  auto imported = kiln_cli("tune import '" + d + "a.json' --db '" + d + "a.db'");
  BOOST_TEST(imported.exit_code == 0);
  BOOST_TEST(has(imported, "1 records added or replaced"));
  BOOST_TEST(kiln_cli("tune import '" + d + "b.json' --db '" + d + "b.db'").exit_code == 0);

  auto shown = kiln_cli("tune show --db '" + d + "a.db'");
  BOOST_TEST(shown.exit_code == 0);
  for (const char* text : {"gemm m=64 n=64 k=64", "gemm@3", "vulkan:llvmpipe / Mesa 22.3.6",
                           "4x4_k4 (2.000 ms) -> 8x4_k8 (1.000 ms)", "2.00x", "1/1", "2026-12-01T10:00:00Z"})
    BOOST_TEST(has(shown, text), text);

  auto merged = kiln_cli("tune merge '" + d + "a.db' '" + d + "b.db' -o '" + d + "c.db'");
  BOOST_TEST(merged.exit_code == 0);
  BOOST_TEST(has(merged, "2 records in"));
  auto exported = kiln_cli("tune export --db '" + d + "c.db' -o '" + d + "c.json'");
  BOOST_TEST(exported.exit_code == 0);
  std::ifstream in(dir / "c.json");
  const std::string json((std::istreambuf_iterator<char>(in)), {});
  BOOST_TEST(json.find("gemm m=64 n=64 k=64") != std::string::npos);
  BOOST_TEST(json.find("gemm m=128 n=128 k=128") != std::string::npos);

  // Bad inputs: exit 2 naming the file, nothing written.
  auto missing = kiln_cli("tune merge '" + d + "a.db' '" + d + "nothing.db' -o '" + d + "d.db'");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(has(missing, d + "nothing.db does not exist"));
  BOOST_TEST(!std::filesystem::exists(dir / "d.db"));
  auto folder = kiln_cli("tune show --db '" + dir.string() + "'");
  BOOST_TEST(folder.exit_code == 2);
  BOOST_TEST(has(folder, dir.string() + " is a directory"));
  auto bad_json = kiln_cli("tune import '" + d + "a.db' --db '" + d + "a.db'");
  BOOST_TEST(bad_json.exit_code == 2);
  BOOST_TEST(has(bad_json, "not valid JSON"));
  BOOST_TEST(kiln_cli("tune").exit_code != 0);
  std::filesystem::remove_all(dir);
}

// kiln tune lists the graph passes' choices (Winograd or direct) beside the
// kernel sites, and --explain writes no database.
BOOST_AUTO_TEST_CASE(tune_explain_lists_graph_choices_beside_kernel_sites) {
  const auto dir = fresh_folder("tune_explain");
  const std::string db = (dir / "tuning.db").string();
  auto explained = kiln_cli("tune --model resnet18 --image-size 32 --explain --db '" + db + "'");
  BOOST_TEST(explained.exit_code == 0);
  BOOST_TEST(has(explained, "winograd   conv batch=1 in=64x8x8 out=64x8x8"));
  BOOST_TEST(has(explained, "conv       conv batch=1 in=64x8x8 out=64x8x8"));
  BOOST_TEST(has(explained, "gemm       gemm batch=1 m=1 n=1000 k=512"));
  BOOST_TEST(!std::filesystem::exists(db));
  std::filesystem::remove_all(dir);
}

// --db on a model command moves max-autotune's tuning database, as
// `--set tune_db=FILE` does; explain names the file it read.
BOOST_AUTO_TEST_CASE(db_option_moves_the_tuning_database_on_model_commands) {
  const auto dir = fresh_folder("db_option");
  const std::string db = (dir / "elsewhere.db").string();
  auto explained = kiln_cli("explain --mode max-autotune --model resnet18 --image-size 32 --set tune_budget=0 --db '" +
                            db + "'");
  BOOST_TEST(explained.exit_code == 0);
  BOOST_TEST(has(explained, "database " + db + ", 0 s tuning now"));
  BOOST_TEST(has(explained, "no record: no tuning database at " + db));
  BOOST_TEST(!std::filesystem::exists(db));  // records only: nothing is written
  std::filesystem::remove_all(dir);
}
