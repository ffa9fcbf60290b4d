# Every shader variant: "name|source.comp|DEFINE=1,OTHER=2". The Vulkan backend asks for variants by name.
# Weight-reading kernels come once per stored type (widened to float32 in the shader); matvec also in a
# 16-byte-load form (VEC) for rows whose length allows it, and both forms again with an epilogue: adding into
# their output (ACCUMULATE: the residual add fused into wo and w2; with NORM also the RMSNorm that follows them),
# w1 and w3 with SwiGLU (SWIGLU), RoPE on the q/k projections (ROPE; QK: both in one dispatch, QKV: with v too),
# and the k and v projections' rows written in binary16, with or without RoPE (OUT_F16: a KV cache in binary16;
# KV_F16: QK's and QKV's).
# The prefill matmul also on matrix units (matmul_coopmat: VK_NV_cooperative_matrix) and in that kernel's
# emulated form (the same staging and binary16 operands, float32 FMAs: tests on any device).
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
foreach(wtype IN ITEMS f32 f16 bf16)
  string(TOUPPER ${wtype} WTYPE)
  list(APPEND STRATA_SHADER_VARIANTS
    "embed_${wtype}|embed.comp|WTYPE_${WTYPE}=1"
    "rmsnorm_${wtype}|rmsnorm.comp|WTYPE_${WTYPE}=1"
    "matvec_${wtype}|matvec.comp|WTYPE_${WTYPE}=1"
    "matvec_vec_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1"
    "matvec_add_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ACCUMULATE=1"
    "matvec_vec_add_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ACCUMULATE=1"
    "matvec_add_norm_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ACCUMULATE=1,NORM=1"
    "matvec_vec_add_norm_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ACCUMULATE=1,NORM=1"
    "matvec_swiglu_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,SWIGLU=1"
    "matvec_vec_swiglu_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,SWIGLU=1"
    "matvec_rope_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1"
    "matvec_vec_rope_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1"
    "matvec_rope_qk_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1"
    "matvec_vec_rope_qk_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1"
    "matvec_rope_qkv_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1,QKV=1"
    "matvec_vec_rope_qkv_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1,QKV=1"
    "matvec_rope_qk_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1,KV_F16=1"
    "matvec_vec_rope_qk_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1,KV_F16=1"
    "matvec_rope_qkv_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1,QKV=1,KV_F16=1"
    "matvec_vec_rope_qkv_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1,QKV=1,KV_F16=1"
    "matvec_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,OUT_F16=1"
    "matvec_vec_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,OUT_F16=1"
    "matvec_rope_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,OUT_F16=1"
    "matvec_vec_rope_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,OUT_F16=1"
    "matmul_${wtype}|matmul.comp|WTYPE_${WTYPE}=1"
    "matmul_coopmat_${wtype}|matmul_coopmat.comp|WTYPE_${WTYPE}=1,COOPMAT_NV=1"
    "matmul_coopmat_emulated_${wtype}|matmul_coopmat.comp|WTYPE_${WTYPE}=1")
endforeach()
# GGUF block types (quant.glsl): read from their blocks by embed, matvec (scalar or 16-byte x loads) and matmul.
foreach(wtype IN ITEMS q8_0 q4_0 q4_k q5_k q6_k)
  string(TOUPPER ${wtype} WTYPE)
  list(APPEND STRATA_SHADER_VARIANTS
    "embed_${wtype}|embed.comp|WTYPE_${WTYPE}=1"
    "matvec_${wtype}|matvec.comp|WTYPE_${WTYPE}=1"
    "matvec_vec_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1"
    "matvec_add_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ACCUMULATE=1"
    "matvec_vec_add_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ACCUMULATE=1"
    "matvec_add_norm_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ACCUMULATE=1,NORM=1"
    "matvec_vec_add_norm_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ACCUMULATE=1,NORM=1"
    "matvec_swiglu_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,SWIGLU=1"
    "matvec_vec_swiglu_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,SWIGLU=1"
    "matvec_rope_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1"
    "matvec_vec_rope_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1"
    "matvec_rope_qk_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1"
    "matvec_vec_rope_qk_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1"
    "matvec_rope_qkv_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1,QKV=1"
    "matvec_vec_rope_qkv_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1,QKV=1"
    "matvec_rope_qk_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1,KV_F16=1"
    "matvec_vec_rope_qk_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1,KV_F16=1"
    "matvec_rope_qkv_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,QK=1,QKV=1,KV_F16=1"
    "matvec_vec_rope_qkv_kvf16_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,QK=1,QKV=1,KV_F16=1"
    "matvec_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,OUT_F16=1"
    "matvec_vec_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,OUT_F16=1"
    "matvec_rope_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,ROPE=1,OUT_F16=1"
    "matvec_vec_rope_f16out_${wtype}|matvec.comp|WTYPE_${WTYPE}=1,VEC=1,ROPE=1,OUT_F16=1"
    "matmul_${wtype}|matmul.comp|WTYPE_${WTYPE}=1"
    "matmul_coopmat_${wtype}|matmul_coopmat.comp|WTYPE_${WTYPE}=1,COOPMAT_NV=1"
    "matmul_coopmat_emulated_${wtype}|matmul_coopmat.comp|WTYPE_${WTYPE}=1")
endforeach()
