# Every shader variant: "name|source.comp|DEFINE=1,OTHER=2". The Vulkan backend asks for variants by name.
# Weight-reading kernels come once per stored type (widened to float32 in the shader); matvec also in a
# 16-byte-load form (VEC) for rows whose length allows it, and both forms again with an epilogue: adding into
# their output (ACCUMULATE: the residual add fused into wo and w2; with NORM also the RMSNorm that follows them),
# w1 and w3 with SwiGLU (SWIGLU), RoPE on the q/k projections (ROPE; QK: both in one dispatch, QKV: with v too),
# and the k and v projections' rows written in binary16, with or without RoPE (OUT_F16: a KV cache in binary16;
# KV_F16: QK's and QKV's).
# The prefill matmul also with 8 x 8 outputs per invocation and two slice buffers (matmul_t8: TILE8), on matrix
# units (matmul_coopmat: VK_NV_cooperative_matrix) and in that kernel's emulated form (the same staging and
# binary16 operands, float32 FMAs: tests on any device).
set(STRATA_SHADER_VARIANTS
  "add|add.comp"
  "copy|copy.comp"
  "swiglu|swiglu.comp"
  "rope|rope.comp"
  "attention|attention.comp"
  "attention_split|attention.comp|SPLIT=1"
  "attention_combine|attention_combine.comp"
  "attention_grouped|attention_grouped.comp"
  "attention_grouped_split|attention_grouped.comp|SPLIT=1"
  "attention_flash|attention_flash.comp"
  "attention_f16|attention.comp|KV_F16=1"
  "attention_split_f16|attention.comp|SPLIT=1,KV_F16=1"
  "attention_grouped_f16|attention_grouped.comp|KV_F16=1"
  "attention_grouped_split_f16|attention_grouped.comp|SPLIT=1,KV_F16=1"
  "attention_flash_f16|attention_flash.comp|KV_F16=1"
  "pack_f16|pack_f16.comp"
  "topk|topk.comp"
  "topk_merge|topk.comp|MERGE=1"
  "read_bandwidth|read_bandwidth.comp"
)
# matvec.comp's forms, "suffix|defines": each is built for every stored type as matvec<suffix>_<type>, and again
# with 16-byte loads (VEC) as matvec_vec<suffix>_<type>. The engine names them the same way (VariantName in
# engine/src/vulkan/vulkan_backend.hpp).
set(matvec_forms
  "|"
  "_add|ACCUMULATE=1"
  "_add_norm|ACCUMULATE=1,NORM=1"
  "_swiglu|SWIGLU=1"
  "_rope|ROPE=1"
  "_rope_qk|ROPE=1,QK=1"
  "_rope_qkv|ROPE=1,QK=1,QKV=1"
  "_rope_qk_kvf16|ROPE=1,QK=1,KV_F16=1"
  "_rope_qkv_kvf16|ROPE=1,QK=1,QKV=1,KV_F16=1"
  "_f16out|OUT_F16=1"
  "_rope_f16out|ROPE=1,OUT_F16=1")
# Every stored type: the float types, and the GGUF block types (quant.glsl), read from their blocks. rmsnorm's
# gains are float vectors only.
foreach(wtype IN ITEMS f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k)
  string(TOUPPER ${wtype} WTYPE)
  set(w "WTYPE_${WTYPE}=1")
  if(wtype MATCHES "^(f32|f16|bf16)$")
    list(APPEND STRATA_SHADER_VARIANTS "rmsnorm_${wtype}|rmsnorm.comp|${w}")
  endif()
  list(APPEND STRATA_SHADER_VARIANTS
    "embed_${wtype}|embed.comp|${w}"
    "matmul_${wtype}|matmul.comp|${w}"
    "matmul_t8_${wtype}|matmul.comp|${w},TILE8=1"
    "matmul_coopmat_${wtype}|matmul_coopmat.comp|${w},COOPMAT_NV=1"
    "matmul_coopmat_emulated_${wtype}|matmul_coopmat.comp|${w}")
  foreach(form IN LISTS matvec_forms)
    string(FIND "${form}" "|" bar)
    string(SUBSTRING "${form}" 0 ${bar} suffix)
    math(EXPR bar "${bar} + 1")
    string(SUBSTRING "${form}" ${bar} -1 defines)
    list(APPEND STRATA_SHADER_VARIANTS
      "matvec${suffix}_${wtype}|matvec.comp|${w},${defines}"
      "matvec_vec${suffix}_${wtype}|matvec.comp|${w},VEC=1,${defines}")
  endforeach()
endforeach()
