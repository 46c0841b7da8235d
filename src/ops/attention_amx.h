// Attention in bf16 compute on AMX tiles (ops/attention.h calls it where bf16 compute's products
// run on AMX: gemm_info().bf16_amx). The same flash-style walk as the f32 path (per KV head and
// query chunk, tile by tile over every source, one online softmax), with its two products on
// AMX-BF16 tiles instead of f32 GEMM calls:
//   scores = Q K^T: Q rounded to bf16 once per head and chunk, each K tile rounded and packed
//     into tile order (amx_pack_keys) once for the query heads that share it (a bf16 store's
//     rows as they are: KvRowSource::rows_bf16);
//   out += P V: the probabilities rounded to bf16 (the A operand), each V tile packed once.
// The scale 1/sqrt(hd) multiplies the f32 scores; the softmax (max, exponentials, sums) and the
// running output stay f32, as in the f32 path, but the exponentials are an f32 polynomial
// (kern::amx_exp_sub_f32, within 2 ulp) rather than the f32 path's correctly rounded ones: the
// probabilities are rounded to bf16 anyway. This is what bf16 attention computes upstream
// (torch's bf16 matmuls: bf16 operands, f32 accumulation), except that the scores and the
// output are kept in f32 rather than rounded to bf16.
//
// Bounds (tests/unit/test_attention_amx.cpp): each product is the tile unit's sum of bf16
// products (ops/amx_gemm.h's bound per k block); a row's bits do not depend on the other rows,
// so a stacked request keeps its bits.
#pragma once

#include <span>

#include "ops/attention.h"

namespace dllmq {

// Whether attention(..., bf16 = true) runs here: the CPU can run AMX tiles and bf16 compute's
// products run on them (gemm_info().bf16_amx).
bool attention_amx_enabled();

// As attention() (same arguments), on AMX tiles. Requires amx_available().
void attention_amx(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
                   std::span<const KvRowSource* const> sources, float* out);

}  // namespace dllmq
