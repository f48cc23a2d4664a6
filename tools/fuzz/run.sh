#!/bin/bash
# `make fuzz`: (a) libFuzzer over memory images of real stops (fuzz/, cargo-fuzz, nightly),
# over linkage names (the demangler) and over ELF files as the native unwinder reads them,
# (b) the corrupted-core campaign over real cores of every supported interpreter, x86-64 and
# arm64 (qemu-user cores of the roots `make arm64` unpacks) (tools/fuzz/campaign.py).
# Idempotent: cargo-fuzz and the nightly toolchain are installed once. FUZZ_SECONDS
# (libFuzzer's time over images, default 300), FUZZ_DEMANGLE_SECONDS (over names, default
# 120), FUZZ_CORES (default 10000), FUZZ_SEED (default: the date) tune it; failures of (b) are
# written to target/fuzz-campaign.
set -euo pipefail
cd "$(dirname "$0")/../.."
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
FUZZ_DEMANGLE_SECONDS=${FUZZ_DEMANGLE_SECONDS:-120}
FUZZ_CORES=${FUZZ_CORES:-10000}
FUZZ_SEED=${FUZZ_SEED:-$(date +%Y%m%d)}
py=$(bash tools/test-env.sh | tail -n 1)

rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
cargo fuzz --version >/dev/null 2>&1 || cargo install cargo-fuzz --locked

# (a) seed images from real cores, then libFuzzer from them.
corpus=target/fuzz-corpus/decoders
cargo +nightly build --release --manifest-path fuzz/Cargo.toml --no-default-features \
  --bin image-from-core
"$py" tools/fuzz/seed_corpus.py fuzz/target/release/image-from-core "$corpus"
cargo +nightly fuzz run --fuzz-dir fuzz decoders "$corpus" -- \
  -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048

# (a') libFuzzer over linkage names (the demangler), seeded with a C++ and a Rust name.
names=target/fuzz-corpus/demangle
mkdir -p "$names"
printf '%s' '_ZN4work6invokeIZNS_6Runner3runEiEUliE_EEiT_i' > "$names/seed-cxx"
printf '%s' '_RINvNtCsl0fKmbkRKnO_17pyunwind_names_rs4walk5applyNCNvB4_3run0EB4_' > "$names/seed-rust"
cargo +nightly fuzz run --fuzz-dir fuzz demangle "$names" -- \
  -max_total_time="$FUZZ_DEMANGLE_SECONDS" -timeout=1 -rss_limit_mb=1024 -max_len=4096

# (a'') libFuzzer over ELF files as the native unwinder reads them (`.eh_frame_hdr`, CFI, symbol
# tables), from small executables and libraries of this system.
elf_corpus=target/fuzz-corpus/elf
mkdir -p "$elf_corpus"
for f in "$py" /usr/lib/x86_64-linux-gnu/libdl.so.2; do
  [ -f "$f" ] && cp -L "$f" "$elf_corpus/seed-$(basename "$f")"
done
cargo +nightly fuzz run --fuzz-dir fuzz elf "$elf_corpus" -- \
  -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536

# (b) the campaign; its debugger sample runs lldb 22 too (installed here, as for the tests).
PYUNWIND_LLDB=$(bash tools/lldb-env.sh 22)
export PYUNWIND_LLDB
"$py" tools/fuzz/campaign.py --cores "$FUZZ_CORES" --seed "$FUZZ_SEED"
