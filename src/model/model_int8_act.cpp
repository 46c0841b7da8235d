// Model::use_int8_activations (--w8a8): each projection with eligible integer codes is repacked
// for the int8-activation kernel (ops/int8_act_gemm.h) and its widening-kernel panels dropped, so
// resident memory stays one copy of the codes.
#include <fmt/format.h>

#include "model/model.h"
#include "model/projections.h"
#include "ops/int8_act_gemm.h"
#include "ops/packed_gemm.h"
#include "util/error.h"

namespace dllmq {

const std::string& Model::use_int8_activations() {
  if (!w8a8_.empty()) return w8a8_;
  int converted = 0, codes = 0;
  std::string why_not;
  auto convert = [&](Linear& l) {
    if (l.packed == nullptr || l.packed->bits == 0) return;  // float weights: exact kernels
    ++codes;
    std::string why;
    if (!int8_act_eligible(*l.packed, &why)) {
      if (why_not.empty()) why_not = why;
      return;
    }
    l.a8 = pack_int8_act(*l.packed);
    l.packed.reset();
    ++converted;
  };
  for_each_linear(w_, convert);
  if (codes == 0)
    fail(
        "--w8a8: {} has no integer weight codes (its projections are floats); quantize it "
        "first (dllmq quantize --weights int8|int4) or load a GPTQ checkpoint",
        dir_);
  if (converted == 0)
    fail("--w8a8: none of the {} quantized projections of {} can take int8 activations: {}", codes,
         dir_, why_not);
  w8a8_ = fmt::format("w8a8 {}: {} of {} quantized projections", int8_act_kernel_name(), converted,
                      codes);
  if (converted < codes) w8a8_ += fmt::format(" (the rest exact: {})", why_not);
  return w8a8_;
}

}  // namespace dllmq
