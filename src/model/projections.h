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

// Every Linear the forward multiplies by: the projections above, each MoE layer's router, and
// the LM head (what Model packs at load, and what --w8a8 repacks).
template <class F>
void for_each_linear(ModelWeights& w, F&& f) {
  for (LayerWeights& L : w.layers) {
    for (Linear* l : {&L.q, &L.k, &L.v, &L.o, &L.gate, &L.up, &L.down}) f(*l);
    if (L.moe) {
      f(L.moe->router);
      for (auto* group : {&L.moe->experts, &L.moe->shared})
        for (SwiGlu& e : *group)
          for (Linear* l : {&e.gate, &e.up, &e.down}) f(*l);
    }
  }
  f(w.lm_head);
}

}  // namespace dllmq
