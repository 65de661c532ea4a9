# The public headers' surface names no internal type (tests/install/
# consumers.sh, headers mode). Reads headers; prints FILE:LINE: TEXT for each
# line outside a class's private or protected section that names an internal
# namespace (kiln::graph::, backend::, ...) or type (Executor,
# DeviceTensorData), and exits 1 if there is one. Allowed anywhere: forward
# declarations ("class Executor;", "namespace graph { class Graph; }"), which
# name a type without exposing it. Plain POSIX awk (mawk, gawk, busybox).
#
# Layout it relies on (kiln's style, checked by the headers compiling): a
# class or struct definition opens its brace on its head's line, and access
# labels stand on lines of their own.

function internal_name(text) {
  return text ~ /(^|[^A-Za-z0-9_])(graph|backend|backends|runtime|compiler|artifact|tune|lower|fuse|kir|render|onnx_import|trace|tools|internal)::/ ||
         text ~ /(^|[^A-Za-z0-9_])(Executor|DeviceTensorData)([^A-Za-z0-9_]|$)/
}

function forward_declaration(text) {
  return text ~ /^[ \t]*(class|struct)[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*;[ \t]*$/ ||
         text ~ /^[ \t]*namespace[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*\{([ \t]*(class|struct)[ \t]+[A-Za-z_][A-Za-z0-9_]*[ \t]*;)+[ \t]*\}[ \t]*$/
}

FNR == 1 { depth = 0; classes = 0; in_block_comment = 0 }

{
  text = $0
  # Comments and string literals say nothing about the API.
  if (in_block_comment) {
    if (index(text, "*/") == 0) next
    text = substr(text, index(text, "*/") + 2)
    in_block_comment = 0
  }
  gsub(/\/\*([^*]|\*+[^*\/])*\*+\//, " ", text)
  if (index(text, "/*") > 0) { text = substr(text, 1, index(text, "/*") - 1); in_block_comment = 1 }
  sub(/\/\/.*/, "", text)
  gsub(/"([^"\\]|\\.)*"/, "\"\"", text)

  # A class or struct definition (not "enum class"): its default access.
  if (text ~ /(^|[^A-Za-z0-9_])(class|struct)[ \t]+[A-Za-z_][A-Za-z0-9_]*[^;{}()]*\{/ && text !~ /enum[ \t]+(class|struct)/) {
    classes++
    level[classes] = depth + 1
    access[classes] = (text ~ /(^|[^A-Za-z0-9_])struct[ \t]/ && text !~ /(^|[^A-Za-z0-9_])class[ \t]/) ? "public" : "private"
  }
  if (classes > 0 && text ~ /^[ \t]*(public|private|protected)[ \t]*:/) {
    label = text
    sub(/^[ \t]*/, "", label)
    sub(/[ \t]*:.*/, "", label)
    access[classes] = label
  }

  hidden = classes > 0 && access[classes] != "public"
  if (!hidden && internal_name(text) && !forward_declaration(text)) {
    printf "%s:%d: %s\n", FILENAME, FNR, $0
    found = 1
  }

  opens = gsub(/\{/, "{", text)
  closes = gsub(/\}/, "}", text)
  depth += opens - closes
  while (classes > 0 && depth < level[classes]) classes--
}

END { exit found ? 1 : 0 }
