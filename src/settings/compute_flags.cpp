// apply_compute_flags (settings/generate_flags.h), apart from the option parsing so that the
// parsers (and their fuzz harnesses) link without the model: --w8a8 repacks its weights.
#include "settings/generate_flags.h"

namespace dllmq::settings {

void apply_compute_flags(const GenerateFlags& f, Model& m) {
  m.set_compute_dtype(resolve_compute_dtype(f));
  if (f.w8a8) m.use_int8_activations();
}

}  // namespace dllmq::settings
