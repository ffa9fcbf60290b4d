#pragma once
// The model's arguments, named as in Meta's ModelArgs (model.py), whatever format they came from.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace strata {

// Llama 3.1 "apply_scaling" of the RoPE frequencies (meta-llama/llama-models).
struct RopeScaling {
    bool enabled = false;
    float factor = 8.0f;
    float low_freq_factor = 1.0f;
    float high_freq_factor = 4.0f;
    int64_t original_max_position_embeddings = 8192;
};

struct ModelConfig {
    int64_t dim = 0;
    int64_t n_layers = 0;
    int64_t n_heads = 0;
    int64_t n_kv_heads = 0;
    int64_t head_dim = 0;     // dim / n_heads unless the file says otherwise
    int64_t hidden_dim = 0;   // FFN hidden size (Meta's multiple_of / ffn_dim_multiplier rule, or from the file)
    int64_t vocab_size = 0;
    float norm_eps = 1e-5f;
    float rope_theta = 500000.0f;
    RopeScaling rope_scaling;
    bool tie_embeddings = false;  // Llama 3.2: no `output`, logits use tok_embeddings
    int64_t max_seq_len = 8192;   // context length the model was trained for

    int32_t bos_id = 128000;
    std::vector<int32_t> eos_ids;  // from generation_config.json / params / GGUF; generation also stops on
                                   // <|eot_id|>, <|end_of_text|>, <|eom_id|>
    bool is_demo = false;          // the built-in demonstration model
    bool demo_trained = false;     // ... and it is the trained one (scripts/train-demo), not random weights
    std::string demo_description;  // what the demonstration model is, from its config.json
    bool is_instruct = false;      // has a chat template (instruct model): chat uses the Llama 3 template
    std::string name;              // a display name (folder or file name)

    int64_t n_rep() const { return n_heads / n_kv_heads; }
    int64_t kv_dim() const { return n_kv_heads * head_dim; }
    int64_t q_dim() const { return n_heads * head_dim; }

    // Throws ModelError when the numbers cannot describe a Llama 3 model (zero sizes, n_heads % n_kv_heads, ...).
    void validate() const;
};

// Meta's FFN hidden size rule: int(2*4*dim/3), times ffn_dim_multiplier, rounded up to multiple_of.
int64_t meta_hidden_dim(int64_t dim, int64_t multiple_of, double ffn_dim_multiplier /* 0 = none */);

void to_json(nlohmann::json& j, const ModelConfig& c);

}  // namespace strata
