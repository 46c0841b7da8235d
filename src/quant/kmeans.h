// Weighted one-dimensional k-means for non-uniform codebooks (KVQuant's nuqX, METHODS.md §2).
// Deterministic: centroids start at the weighted quantiles (i + 0.5) / k of the data, then
// Lloyd iterations (assignment to the nearest centroid, weighted means) until no centroid moves
// by more than 1e-7 of the data range or max_iter is reached. An empty cluster keeps its
// previous centroid. Objective: sum_i w_i (x_i - c(x_i))^2.
#pragma once

#include <span>
#include <vector>

namespace dllmq {

// k sorted centroids (ascending; duplicates allowed when the data has fewer than k distinct
// values, e.g. all-equal data gives k copies of that value). x must be non-empty and finite;
// w empty means unit weights, else w.size() == x.size(), every w_i >= 0 and finite and their
// sum > 0. Throws dllmq::Error otherwise.
std::vector<float> weighted_kmeans_1d(std::span<const float> x, std::span<const float> w, int k,
                                      int max_iter = 100);

// Index of the nearest of k sorted centroids (ties to the lower index).
int nearest_centroid(const float* c, int k, float x);

// Weighted squared error sum_i w_i (x_i - c(x_i))^2 of x under centroids c (w empty = 1).
double weighted_sq_error(std::span<const float> x, std::span<const float> w,
                         std::span<const float> c);

}  // namespace dllmq
