#!/usr/bin/env bash
# kiln as an application uses it: installed from this build into a temporary
# folder (meson install --destdir), then consumed from there. One check per
# test (tests/meson.build):
#   headers     the installed headers are include/kiln's, each compiles
#               alone with only the installed include folder, and none names
#               an internal type outside a private section
#               (public_surface.awk); trace.h's example and Builder::op with
#               attributes built and run, libkiln's errors caught as
#               kiln::Error (its typeinfo exported)
#   pkg-config  installed, moved elsewhere: the README example built with c++
#               and pkg-config's flags from the moved kiln.pc alone, run
#   cmake       installed, moved: examples/ built with find_package(kiln); the README example,
#               classify and segment run, and their answers are `kiln run`'s;
#               max-autotune finds the installed tuning worker, both from a
#               program linked with libkiln and from the installed kiln tool
#   subproject  examples/ built by Meson with kiln as its subproject; the
#               README example run
#
# Environment (set by tests/meson.build): KILN_SOURCE_ROOT, KILN_BUILD_ROOT,
# MESON, KILN_CXX (the build's C++ compiler command), CMAKE, PKG_CONFIG,
# KILN_PREFIX, KILN_LIBDIR, KILN_INCLUDEDIR, KILN_BINDIR, KILN_LIBEXECDIR (as
# configured), KILN_BUILDTYPE.
set -euo pipefail
# meson test points LD_LIBRARY_PATH at the build tree's libkiln; the programs
# here must load the installed one.
unset LD_LIBRARY_PATH

mode=${1:?usage: consumers.sh headers|pkg-config|cmake|subproject}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-install-$mode.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "FAIL ($mode): $*" >&2
  exit 1
}

# Runs a command, keeping its output in $tmp/NAME.out and .err; fails with
# both shown if it fails.
run() {
  local name=$1
  shift
  if ! "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"; then
    cat "$tmp/$name.out" "$tmp/$name.err" >&2
    fail "$name: '$*' exited with an error"
  fi
}

# Fails unless $tmp/NAME.out has a line matching the extended regex.
expect_line() {
  local name=$1 regex=$2
  grep -Eq -- "$regex" "$tmp/$name.out" || { cat "$tmp/$name.out" >&2; fail "$name: no line matches '$regex'"; }
}

# The compiler as a word list; the last word is the compiler itself (the
# others a launcher such as ccache).
read -r -a cxx <<<"$KILN_CXX"

install_kiln() {
  run install "$MESON" install -C "$KILN_BUILD_ROOT" --no-rebuild --destdir "$tmp/stage"
  prefix="$tmp/stage$KILN_PREFIX"
  libdir="$prefix/$KILN_LIBDIR"
  includedir="$prefix/$KILN_INCLUDEDIR"
  [[ -e "$libdir/libkiln.so" || -e "$libdir/libkiln.a" ]] || fail "no libkiln in $libdir"
}

# Moves the installed tree elsewhere, as a user copies an install or unpacks
# it at another prefix: what consumes it must follow (relocatable kiln.pc,
# the CMake package's paths relative to itself).
move_install() {
  mv "$tmp/stage" "$tmp/moved"
  prefix="$tmp/moved$KILN_PREFIX"
  libdir="$prefix/$KILN_LIBDIR"
  includedir="$prefix/$KILN_INCLUDEDIR"
}

# The README example prints "1000 logits, compiled in <ms> ms" and "8".
check_readme() {
  local binary=$1 name=$2
  run "$name" "$binary"
  expect_line "$name" '^1000 logits, compiled in [0-9.e+-]+ ms$'
  expect_line "$name" '^8$'
}

# The number after "class" on the first ranked line ("  1. ...").
first_class() {
  grep -E -m1 '^ +1\. ' "$tmp/$1.out" | sed -E 's/.*class +([0-9]+).*/\1/'
}
# The percentage on the first ranked line.
first_share() {
  grep -E -m1 '^ +1\. ' "$tmp/$1.out" | sed -E 's/.* ([0-9.]+)% of pixels.*/\1/'
}

case "$mode" in
headers)
  install_kiln
  installed=$(cd "$includedir/kiln" && ls)
  expected=$(cd "$KILN_SOURCE_ROOT/include/kiln" && ls)
  [[ "$installed" == "$expected" ]] ||
    fail "installed headers differ from include/kiln (add new ones to include/meson.build): installed [$installed], source [$expected]"
  for header in $installed; do
    if grep -Eq '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$includedir/kiln/$header"; then
      fail "kiln/$header includes a header by \"...\": a public header includes only <kiln/...> and the standard library"
    fi
    printf '#include <kiln/%s>\n' "$header" >"$tmp/alone.cpp"
    run "alone_$header" "${cxx[@]}" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -I"$includedir" "$tmp/alone.cpp"
  done
  # The headers are the whole API: no public member or free function takes or
  # returns an internal type (public_surface.awk). The checker must also catch
  # a planted accessor, so that a change to it cannot make it pass anything.
  surface="$KILN_SOURCE_ROOT/tests/install/public_surface.awk"
  if ! awk -f "$surface" "$includedir"/kiln/*.h >"$tmp/surface.out" 2>&1; then
    cat "$tmp/surface.out" >&2
    fail "public headers name internal types outside private sections (kiln's tools and tests reach them through src/runtime/internal_access.h)"
  fi
  printf 'namespace kiln {\nnamespace graph { class Graph; }\nclass Model {\n private:\n  int x_;\n public:\n  const graph::Graph& graph() const;\n};\n}\n' >"$tmp/planted.h"
  if awk -f "$surface" "$tmp/planted.h" >"$tmp/planted.out" 2>&1 || ! grep -q 'planted.h:7:' "$tmp/planted.out"; then
    cat "$tmp/planted.out" >&2
    fail "public_surface.awk missed a public accessor returning graph::Graph"
  fi
  # What the headers declare can be called with them alone: trace.h's own
  # example and Builder::op with attributes, built and run.
  export PKG_CONFIG_PATH="$libdir/pkgconfig"
  run flags "$PKG_CONFIG" --define-variable=prefix="$prefix" --cflags --libs kiln
  # shellcheck disable=SC2086 # pkg-config's flags are words
  run compile "${cxx[@]}" -std=c++20 "$KILN_SOURCE_ROOT/tests/install/public_api.cpp" -o "$tmp/public_api" \
    $(cat "$tmp/flags.out") -Wl,-rpath,"$libdir"
  run public_api "$tmp/public_api"
  expect_line public_api '^traced: 1 graph break\(s\); out = \[1 4 9 16\]$'
  expect_line public_api '^ReduceMean over axis 1: shape \[2\] = \[2 5\]$'
  expect_line public_api '^unknown model: caught kiln::Error \(not found\)$'
  expect_line public_api '^wrong input shape: caught kiln::Error \(shape mismatch\)$'
  expect_line public_api '^modes: default reduce-overhead max-autotune$'
  expect_line public_api '^source targets: vulkan( cuda)?( hip)? c$'
  expect_line public_api '^c99 kernels of the ReduceMean model: 1$'
  expect_line public_api '^tuning database of /var/cache/kiln: /var/cache/kiln/tuning.db$'
  expect_line public_api '^tuning records of a missing file: caught kiln::Error \(not found\)$'
  expect_line public_api '^log handler: got messages$'
  expect_line public_api '^device memory in use: some$'
  echo "ok: $(echo "$installed" | wc -w) public headers installed, each compiles alone and names no internal type; trace.h's example and Builder::op ran; libkiln's errors caught as kiln::Error"
  ;;

pkg-config)
  install_kiln
  move_install
  # Only the moved kiln.pc is visible (PKG_CONFIG_LIBDIR replaces the system
  # paths): its prefix must follow the move, and it must need no other
  # package's .pc (a shared libkiln carries its dependencies).
  export PKG_CONFIG_LIBDIR="$libdir/pkgconfig"
  unset PKG_CONFIG_PATH
  run flags "$PKG_CONFIG" --cflags --libs kiln
  flags=$(cat "$tmp/flags.out")
  # The relocatable prefix leaves "pkgconfig/../../.." in the paths: compare them resolved.
  include_flag=$(grep -Eo -- '-I[^ ]+' "$tmp/flags.out" | head -1)
  lib_flag=$(grep -Eo -- '-L[^ ]+' "$tmp/flags.out" | head -1)
  [[ -n "$include_flag" && -n "$lib_flag" && "$flags" == *"-lkiln"* &&
     $(realpath "${include_flag#-I}") == $(realpath "$includedir") &&
     $(realpath "${lib_flag#-L}") == $(realpath "$libdir") ]] ||
    fail "pkg-config's flags do not name the moved kiln ($includedir, $libdir): $flags"
  # shellcheck disable=SC2086 # pkg-config's flags are words
  run compile "${cxx[@]}" -std=c++20 "$KILN_SOURCE_ROOT/examples/readme.cpp" -o "$tmp/readme" $flags -Wl,-rpath,"$libdir"
  if [[ -e "$libdir/libkiln.so" ]]; then
    run ldd ldd "$tmp/readme"
    expect_line ldd "libkiln\.so.* => $libdir/libkiln\.so"
  fi
  check_readme "$tmp/readme" readme
  echo "ok: the README example built with pkg-config ran"
  ;;

cmake)
  install_kiln
  move_install
  run configure "$CMAKE" -S "$KILN_SOURCE_ROOT/examples" -B "$tmp/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_CXX_COMPILER="${cxx[-1]}"
  run build "$CMAKE" --build "$tmp/build"
  check_readme "$tmp/build/readme" readme
  images="$KILN_SOURCE_ROOT/data/images"
  kiln_tool="$prefix/$KILN_BINDIR/kiln"

  # classify's answer is `kiln run`'s: the same model, picture and preparation.
  run classify "$tmp/build/classify" resnet18 "$images/chelsea.png" --size 64 --labels "$KILN_SOURCE_ROOT/data/imagenet_classes.txt"
  expect_line classify '^  1\. class [0-9]+ .+  p = [01]\.[0-9]{4}$'
  [[ $(grep -Ec '^  [1-5]\. class ' "$tmp/classify.out") == 5 ]] || fail "classify did not list five classes"
  run kiln_classify "$kiln_tool" run --model resnet18 --image "$images/chelsea.png" --image-size 64 --iters 0
  [[ "$(first_class classify)" == "$(first_class kiln_classify)" ]] ||
    fail "classify's top class $(first_class classify) is not kiln run's $(first_class kiln_classify)"
  # Without --image, the installed (and moved) kiln finds its own copy of the
  # photograph, from a folder that is not the source tree.
  (cd "$tmp" && run kiln_default_image "$kiln_tool" run --model resnet18 --image-size 64 --iters 0)
  expect_line kiln_default_image "on $prefix/share/kiln/images/chelsea\.png \(451x300"
  [[ "$(first_class kiln_default_image)" == "$(first_class kiln_classify)" ]] ||
    fail "kiln run without --image did not classify the installed photograph as with it"

  # A compiled-model file from the installed tool, loaded by the program: the same answer, nothing compiled.
  run kiln_compile "$kiln_tool" compile --model resnet18 --image-size 64 -o "$tmp/resnet18.kiln"
  run classify_file "$tmp/build/classify" "$tmp/resnet18.kiln" "$images/chelsea.png"
  expect_line classify_file '^resnet18 on vulkan \(default\), loaded in [0-9]+ ms; top-5:$'
  [[ "$(first_class classify_file)" == "$(first_class kiln_classify)" ]] ||
    fail "classify's top class from resnet18.kiln $(first_class classify_file) is not kiln run's $(first_class kiln_classify)"

  # segment's mask agrees with `kiln run`'s on the largest class and its share.
  run segment "$tmp/build/segment" segformer_b0 "$images/chelsea.png" "$tmp/mask.png" --size 32
  expect_line segment "^mask written to $tmp/mask.png$"
  [[ "$(head -c 8 "$tmp/mask.png" | od -An -tx1 | tr -d ' \n')" == 89504e470d0a1a0a ]] || fail "segment's mask is not a PNG file"
  mkdir "$tmp/run"
  run kiln_segment "$kiln_tool" run --model segformer_b0 --image "$images/chelsea.png" --image-size 32 --iters 0 --output-dir "$tmp/run"
  [[ "$(first_class segment) $(first_share segment)" == "$(first_class kiln_segment) $(first_share kiln_segment)" ]] ||
    fail "segment's largest class and share ($(first_class segment) $(first_share segment)) are not kiln run's ($(first_class kiln_segment) $(first_share kiln_segment))"

  # max-autotune starts the installed worker: found from libkiln's folder by a
  # program, and from bin/ by the kiln tool (both staged, so only a lookup
  # relative to them finds it).
  worker="$prefix/$KILN_LIBEXECDIR/kiln/kiln-tune-worker"
  [[ -x "$worker" ]] || fail "the tuning worker is not installed at $worker"
  # Tokenizer.model files are read through this module, found where the worker is.
  [[ -f "$prefix/$KILN_LIBEXECDIR/kiln/libkiln-sentencepiece.so" ]] ||
    fail "the SentencePiece module is not installed beside the tuning worker"
  # A database each, or the second run would find every site tuned and start no worker.
  tuning=(env -u KILN_TUNE_WORKER KILN_LOG=debug KILN_TUNE_BUDGET=3s)
  run tune_program "${tuning[@]}" KILN_TUNE_DB="$tmp/program.db" \
    "$tmp/build/classify" resnet18 "$images/chelsea.png" --size 32 --mode max-autotune
  grep -Fqx "kiln debug: tuning worker: $worker" "$tmp/tune_program.err" ||
    { cat "$tmp/tune_program.err" >&2; fail "classify (libkiln) did not start the installed worker $worker"; }
  grep -Eq '^kiln info: max-autotune: .+ -> ' "$tmp/tune_program.err" ||
    { cat "$tmp/tune_program.err" >&2; fail "classify (libkiln) tuned no kernel"; }
  run tune_tool "${tuning[@]}" KILN_TUNE_DB="$tmp/tool.db" \
    "$kiln_tool" run --model resnet18 --image "$images/chelsea.png" --image-size 32 --iters 0 --mode max-autotune
  grep -Fqx "kiln debug: tuning worker: $worker" "$tmp/tune_tool.err" ||
    { cat "$tmp/tune_tool.err" >&2; fail "the installed kiln tool did not start the installed worker $worker"; }
  echo "ok: examples built with CMake ran and agree with kiln run; max-autotune found the installed worker"
  ;;

subproject)
  # examples/ as a project of its own with kiln's source as subprojects/kiln
  # (links, so nothing is copied); the build is configured as this one was,
  # so that a compiler cache can serve kiln's objects.
  cp -r "$KILN_SOURCE_ROOT/examples" "$tmp/examples"
  mkdir -p "$tmp/examples/subprojects/kiln"
  for item in meson.build meson_options.txt include src graph backends shaders tools data; do
    ln -s "$KILN_SOURCE_ROOT/$item" "$tmp/examples/subprojects/kiln/$item"
  done
  run configure env CXX="$KILN_CXX" "$MESON" setup "$tmp/build" "$tmp/examples" --buildtype="$KILN_BUILDTYPE" \
    -Db_ndebug=if-release --force-fallback-for=kiln
  # The examples and what they need (libkiln), not kiln's tools.
  run build "$MESON" compile -C "$tmp/build" readme classify segment
  check_readme "$tmp/build/readme" readme
  echo "ok: examples/ built with kiln as a Meson subproject; the README example ran"
  ;;

*)
  fail "unknown mode '$mode'"
  ;;
esac
