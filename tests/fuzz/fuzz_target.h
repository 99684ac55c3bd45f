// The entry points every fuzz target defines (libFuzzer's), so that the same target links
// against libFuzzer (clang, `fuzz` preset) or against replay_main.cpp (any compiler, CTest).
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

// A fuzz target's property failed: prints what and aborts, so libFuzzer keeps the input as a
// crash and the replay test fails. Used for invariants, never for inputs that are merely bad.
[[noreturn]] void fuzz_fail(const char* target, const char* what);
