// Linear layers: y[M,N] = x[M,K] · W[N,K]ᵀ (+ bias), with W in f32, f16 or bf16.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cpu/weight_view.h"

namespace sy::kernels {

// Sets the threads used by the BLAS library and by our own kernels (OpenMP).
void set_num_threads(int n);
// Our kernels' threads on the calling thread only (a device thread of the wall-clock cpu
// backend), so that concurrent devices together use the machine's threads once.
void set_thread_num_threads(int n);
int num_threads();

// y = x · Wᵀ + bias. x is [M, w.cols] and y is [M, w.rows], both row-major float32; bias is
// [w.rows] float32 or null. With accumulate, y += x · Wᵀ (+ bias) instead of overwriting.
// f32 weights go to OpenBLAS sgemm; f16/bf16 weights are read directly by a vectorised
// kernel for small M (decode) and converted panel by panel into sgemm for large M.
void linear(const float* x, std::int64_t M, const WeightView& w, const float* bias, float* y,
            bool accumulate = false);

// What a linear layer multiplies: its float32 input as given (the cpu backend), or that input
// first rounded to the weight's 16-bit type, as the cuda backend feeds its tensor-core GEMMs
// (both operands of one type). The second lets a cpu run reproduce a GPU's bf16 numbers: the
// rounding moves logits by a few percent of their spread, enough to flip near-ties.
enum class GemmInputs : std::uint8_t { Float32, WeightType };

// The input a linear over weights of type `type` multiplies under `inputs`: x itself, or its
// first n values rounded (f32_to_bf16 / f32_to_f16, as the cuda kernels round) into `rounded`.
const float* gemm_input(const float* x, std::int64_t n, DType type, GemmInputs inputs, std::vector<float>& rounded);

// Plain row-major float32 GEMM: C[M,N] = alpha · A[M,K] · op(B) + beta · C, where op(B) is
// B[K,N] or, with b_transposed, B[N,K]ᵀ. lda/ldb/ldc are row strides in elements.
void sgemm(bool b_transposed, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
           const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
           std::int64_t ldc);

}  // namespace sy::kernels
