// The KV cache as the attention shaders read it (bindings 1 and 2): float32, or with KV_F16 binary16 values two
// to a 32-bit word (element 2i in the low half, 2i + 1 in the high one; pack_f16.comp writes them). Element e
// of a cache (its row, kv head and dim; the push constants' k_first / v_first are in 32-bit words, as every
// binding's) comes from key_at / value_at, which widen binary16 exactly.
#ifdef KV_F16
layout(std430, binding = 1) readonly buffer K { uint k[]; };  // [pos0 + T, n_kv_heads * head_dim] / 2 words
layout(std430, binding = 2) readonly buffer V { uint v[]; };
float key_at(uint e) { return unpackHalf2x16(k[p.k_first + (e >> 1u)])[e & 1u]; }
float value_at(uint e) { return unpackHalf2x16(v[p.v_first + (e >> 1u)])[e & 1u]; }
// Elements e and e + 1 (e even) from one word: the staging loops take them in pairs.
vec2 key_pair(uint e) { return unpackHalf2x16(k[p.k_first + (e >> 1u)]); }
vec2 value_pair(uint e) { return unpackHalf2x16(v[p.v_first + (e >> 1u)]); }
#else
layout(std430, binding = 1) readonly buffer K { float k[]; };  // [pos0 + T, n_kv_heads * head_dim]
layout(std430, binding = 2) readonly buffer V { float v[]; };  // [pos0 + T, n_kv_heads * head_dim]
float key_at(uint e) { return k[p.k_first + e]; }
float value_at(uint e) { return v[p.v_first + e]; }
#endif
