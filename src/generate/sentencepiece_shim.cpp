// libsentencepiece behind a C interface, built as a module of its own that
// kiln opens in a link-map namespace of its own (dlmopen): Debian's
// libsentencepiece carries its own protobuf runtime, which the process's
// libprotobuf (the ONNX importer's) would otherwise replace. Only C types
// cross: text and ids go out through the caller's callbacks, since each
// namespace has its own heap. Not sanitized (its namespace has no sanitizer
// runtime). sentencepiece_tokenizer.cpp is the only caller.
#include <sentencepiece_processor.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace {

using Processor = sentencepiece::SentencePieceProcessor;
using TextSink = void (*)(void* context, const char* data, std::size_t size);
using IdSink = void (*)(void* context, const int* ids, std::size_t count);

Processor& processor(void* handle) { return *static_cast<Processor*>(handle); }

}  // namespace

extern "C" {

// A processor for the model at `path`, or nullptr with the reason given to `error`.
__attribute__((visibility("default"))) void* kiln_spm_load(const char* path, TextSink error, void* context) {
  auto* loaded = new Processor();
  const sentencepiece::util::Status status = loaded->Load(path);
  if (status.ok()) return loaded;
  const std::string reason = status.ToString();
  error(context, reason.data(), reason.size());
  delete loaded;
  return nullptr;
}

__attribute__((visibility("default"))) void kiln_spm_free(void* handle) { delete static_cast<Processor*>(handle); }

// 1 with the ids given to `ids`; 0 with the reason given to `error`.
__attribute__((visibility("default"))) int kiln_spm_encode(void* handle, const char* text, std::size_t size, IdSink ids,
                                                           void* ids_context, TextSink error, void* error_context) {
  std::vector<int> pieces;
  const sentencepiece::util::Status status = processor(handle).Encode(std::string_view(text, size), &pieces);
  if (!status.ok()) {
    const std::string reason = status.ToString();
    error(error_context, reason.data(), reason.size());
    return 0;
  }
  ids(ids_context, pieces.data(), pieces.size());
  return 1;
}

// The text of `count` pieces (each `pieces[i]`, `sizes[i]` bytes), decoded together.
__attribute__((visibility("default"))) void kiln_spm_decode(void* handle, const char* const* pieces,
                                                            const std::size_t* sizes, std::size_t count, TextSink text,
                                                            void* context) {
  std::vector<std::string> run;
  run.reserve(count);
  for (std::size_t i = 0; i < count; ++i) run.emplace_back(pieces[i], sizes[i]);
  std::string decoded;
  processor(handle).Decode(run, &decoded);
  text(context, decoded.data(), decoded.size());
}

__attribute__((visibility("default"))) void kiln_spm_id_to_piece(void* handle, int id, TextSink text, void* context) {
  const std::string piece = processor(handle).IdToPiece(id);
  text(context, piece.data(), piece.size());
}

__attribute__((visibility("default"))) int kiln_spm_piece_to_id(void* handle, const char* piece, std::size_t size) {
  return processor(handle).PieceToId(std::string_view(piece, size));
}

__attribute__((visibility("default"))) int kiln_spm_is_control(void* handle, int id) {
  return processor(handle).IsControl(id) ? 1 : 0;
}

// piece count, bos, eos, unk: which = 0, 1, 2, 3.
__attribute__((visibility("default"))) int kiln_spm_number(void* handle, int which) {
  Processor& p = processor(handle);
  switch (which) {
    case 0: return p.GetPieceSize();
    case 1: return p.bos_id();
    case 2: return p.eos_id();
    default: return p.unk_id();
  }
}

}  // extern "C"
