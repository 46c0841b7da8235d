// The attention/MLP projections of a bound model, MoE experts (shared ones too) included, the
// router, embedding and LM head not: what `dllmq quantize` turns into codes and what inspect
// counts as projection bytes.
#pragma once

#include "model/moe.h"
#include "model/weights.h"

namespace dllmq {

template <class F>
void for_each_projection(const ModelWeights& w, F&& f) {
  for (const LayerWeights& L : w.layers) {
    for (const Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) f(*l);
    if (L.moe)
      for (auto* group : {&L.moe->experts, &L.moe->shared})
        for (const SwiGlu& e : *group)
          for (const Linear* l : {&e.gate, &e.up, &e.down}) f(*l);
  }
}

}  // namespace dllmq
