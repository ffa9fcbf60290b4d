#!/usr/bin/env python3
"""Writes the seed corpora in tests/fuzz/corpus/<target>/: small valid and near-valid inputs, byte for byte
reproducible (python3 tests/fuzz/make_corpus.py). Nothing here imports torch or numpy: the pickles, zips,
.npy and safetensors files are assembled from their format descriptions, so the seeds do not depend on how
Strata writes them. The GGUF seed comes from `strata-cli quantize` (see corpus/README.md)."""
import json
import os
import struct
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "corpus")
REFERENCE = os.path.join(HERE, "..", "..", "..", "shared", "reference", "model")
SEP = b"\n@@\n"  # fuzz_support.hpp: split()


def put(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def js(v):
    return json.dumps(v, indent=1).encode()


# ---- Hugging Face folder: config.json @@ generation_config.json @@ model.safetensors.index.json ----------------

HF_NAMES = ["model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"] + [
    "model.layers.0." + n for n in [
        "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
        "mlp.gate_proj.weight", "mlp.down_proj.weight", "mlp.up_proj.weight", "input_layernorm.weight",
        "post_attention_layernorm.weight"]]

# The model fuzz_hf_folder.cpp's model.safetensors holds.
TINY_HF = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8, "intermediate_size": 16,
    "num_hidden_layers": 1, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 4,
    "vocab_size": 512, "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 8192,
    "tie_word_embeddings": False, "bos_token_id": 256, "eos_token_id": 257, "hidden_act": "silu",
    "attention_bias": False, "mlp_bias": False, "pretraining_tp": 1,
}


def hf_corpus():
    t = "fuzz_hf_folder"
    index = {"metadata": {"total_size": 12544}, "weight_map": {n: "model.safetensors" for n in HF_NAMES}}
    put(t, "tiny_loads", js(TINY_HF) + SEP + js({"bos_token_id": 256, "eos_token_id": [257, 265]}) + SEP + js(index))
    put(t, "tiny_config_only", js(TINY_HF))
    scaled = dict(TINY_HF, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
                  tie_word_embeddings=True)
    put(t, "tiny_scaled_tied", js(scaled) + SEP + js({"eos_token_id": 265, "do_sample": False}))
    missing = {"weight_map": dict(index["weight_map"], **{"lm_head.weight": "model-00002-of-00002.safetensors"})}
    put(t, "index_names_missing_shard", js(TINY_HF) + SEP + b"{}" + SEP + js(missing))
    with open(os.path.join(REFERENCE, "config.json"), "rb") as f:
        golden = f.read()
    with open(os.path.join(REFERENCE, "generation_config.json"), "rb") as f:
        golden_gen = f.read()
    put(t, "golden_config", golden + SEP + golden_gen)


# ---- pickle (torch.save's data.pkl, protocol 2) ----------------------------------------------------------------

class Pickle:
    def __init__(self):
        self.b = bytearray(b"\x80\x02")  # PROTO 2

    def op(self, c):
        self.b += c

    def s(self, text):  # SHORT_BINUNICODE or BINUNICODE
        t = text.encode()
        self.b += (b"\x8c" + bytes([len(t)]) if len(t) < 256 else b"X" + struct.pack("<I", len(t))) + t

    def int(self, v):
        if 0 <= v < 256:
            self.b += b"K" + bytes([v])
        elif 0 <= v < 65536:
            self.b += b"M" + struct.pack("<H", v)
        else:
            self.b += b"J" + struct.pack("<i", v)

    def tuple(self, vals):
        if len(vals) <= 3:
            for v in vals:
                self.int(v)
            self.b += [b")", b"\x85", b"\x86", b"\x87"][len(vals)]
        else:
            self.b += b"("
            for v in vals:
                self.int(v)
            self.b += b"t"


def state_dict(tensors, storage_class="FloatStorage", numel=None):
    """tensors: (name, shape, key, offset). As torch.save writes model.state_dict(): OrderedDict by REDUCE, items by
    SETITEMS, globals memoized and fetched again with BINGET, then BUILD with an empty _metadata."""
    p = Pickle()
    p.op(b"ccollections\nOrderedDict\nq\x00)Rq\x01(")
    memo = 4
    for i, (name, shape, key, offset) in enumerate(tensors):
        p.s(name)
        p.op(b"q" + bytes([memo % 256]))
        memo += 1
        p.op(b"ctorch._utils\n_rebuild_tensor_v2\nq\x02" if i == 0 else b"h\x02")
        p.op(b"((")
        p.s("storage")
        p.op(("ctorch\n%s\nq\x03" % storage_class).encode() if i == 0 else b"h\x03")
        p.s(key)
        p.s("cpu")
        n = 1
        for d in shape:
            n *= d
        p.int(numel.get(key, n + offset) if numel else n + offset)
        p.op(b"tQ")  # TUPLE, BINPERSID
        p.int(offset)
        p.tuple(shape)
        stride, acc = [], 1
        for d in reversed(shape):
            stride.insert(0, acc)
            acc *= d
        p.tuple(stride)
        p.op(b"\x89h\x00)Rt")  # requires_grad False, OrderedDict() hooks, TUPLE of the arguments
        p.op(b"R")
    p.op(b"u}")  # SETITEMS; state
    p.s("_metadata")
    p.op(b"h\x00)R")
    p.op(b"sb.")  # SETITEM, BUILD, STOP
    return bytes(p.b)


# The model fuzz_meta_folder.cpp's storages can hold: dim 8, 1 layer, 2 heads : 1 KV head, FFN 32, vocab 512.
TINY_PARAMS = {"dim": 8, "n_layers": 1, "n_heads": 2, "n_kv_heads": 1, "vocab_size": 512, "multiple_of": 16,
               "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": False}


def meta_tensors(tied=False):
    t = [("tok_embeddings.weight", [512, 8], "0", 0)]
    if not tied:
        t.append(("output.weight", [512, 8], "1", 0))
    t += [("layers.0.attention.wq.weight", [8, 8], "2", 0),
          ("layers.0.attention.wk.weight", [4, 8], "kv", 0),
          ("layers.0.attention.wv.weight", [4, 8], "kv", 32),
          ("layers.0.attention.wo.weight", [8, 8], "3", 0),
          ("layers.0.feed_forward.w1.weight", [32, 8], "4", 0),
          ("layers.0.feed_forward.w2.weight", [8, 32], "5", 0),
          ("layers.0.feed_forward.w3.weight", [32, 8], "6", 0),
          ("layers.0.attention_norm.weight", [8], "7", 0),
          ("layers.0.ffn_norm.weight", [8], "8", 0),
          ("norm.weight", [8], "9", 0)]
    return t


def meta_corpus():
    t = "fuzz_meta_folder"
    kv = {"kv": 64}
    put(t, "tiny_loads", js(TINY_PARAMS) + SEP + state_dict(meta_tensors(), numel=kv))
    put(t, "tiny_tied_scaled",
        js(dict(TINY_PARAMS, use_scaled_rope=True, max_seq_len=2048)) + SEP + state_dict(meta_tensors(True), numel=kv))
    put(t, "tiny_bf16_storages", js(TINY_PARAMS) + SEP + state_dict(meta_tensors(), "BFloat16Storage", numel=kv))
    put(t, "params_only", js(dict(TINY_PARAMS, ffn_dim_multiplier=1.3)))


def pickle_corpus():
    t = "fuzz_pickle"
    sd = state_dict(meta_tensors(), numel={"kv": 64})
    put(t, "state_dict.pkl", sd)
    # A torch.save archive: stored members under one folder (fuzz_pickle also opens the input as a zip).
    path = os.path.join(CORPUS, t, "consolidated.pth")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        for name, data in [("consolidated/data.pkl", sd), ("consolidated/byteorder", b"little"),
                           ("consolidated/data/0", struct.pack("<16f", *range(16))),
                           ("consolidated/version", b"3\n")]:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            z.writestr(info, data)


# ---- .npy ------------------------------------------------------------------------------------------------------

def npy(descr, shape, values, version=1):
    dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (descr, dims)
    pre = 10 if version == 1 else 12
    header += " " * ((64 - (pre + len(header) + 1) % 64) % 64) + "\n"
    size = struct.pack("<H", len(header)) if version == 1 else struct.pack("<I", len(header))
    fmt = "<%d%s" % (len(values), "f" if descr == "<f4" else "d")
    return b"\x93NUMPY" + bytes([version, 0]) + size + header.encode() + struct.pack(fmt, *values)


def npy_corpus():
    t = "fuzz_npy"
    put(t, "f4_2x3.npy", npy("<f4", [2, 3], [0.5 * i for i in range(6)]))
    put(t, "f8_4_v2.npy", npy("<f8", [4], [1.0, -2.0, 3.5, 1e30], version=2))
    put(t, "f4_scalar.npy", npy("<f4", [], [7.0]))
    put(t, "f4_empty.npy", npy("<f4", [0, 5], []))


# ---- safetensors -----------------------------------------------------------------------------------------------

def safetensors_corpus():
    t = "fuzz_safetensors"
    tensors = [("a", "F32", [2, 4], struct.pack("<8f", *range(8))), ("b", "BF16", [4, 4], b"\x80\x3f" * 16),
               ("c", "F16", [4], b"\x00\x3c" * 4)]
    header, data = {"__metadata__": {"format": "pt"}}, b""
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    put(t, "three.safetensors", struct.pack("<Q", len(h)) + h + data)


# ---- tokenizer (first byte picks the mode: fuzz_tokenizer.cpp) -------------------------------------------------

def gpt2_bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")


def tokenizer_corpus():
    t = "fuzz_tokenizer"
    put(t, "encode_plain", b"\x00Hello world, the thing  in\n\nthere 123456 \xe4\xbd\xa0\xe5\xa5\xbd")
    put(t, "encode_special", b"\x01<|begin_of_text|>hi<|eot_id|> there")
    put(t, "decode_ids", b"\x02" + b"".join(struct.pack("<I", i)[:3] for i in [9906, 1917, 128000, 300000, 220]))
    import base64
    ranks = "".join("%s %d\n" % (base64.b64encode(bytes([b])).decode(), b) for b in range(256))
    ranks += "%s 256\n%s 257\n" % (base64.b64encode(b"th").decode(), base64.b64encode(b" the").decode())
    put(t, "tiktoken_ranks", b"\x03" + ranks.encode())
    u = gpt2_bytes_to_unicode()
    vocab = {u[b]: b for b in range(256)}
    for word in [b"th", b" t", b"he", b" the", b"in", b"ing"]:
        vocab["".join(u[c] for c in word)] = len(vocab)
    tok = {
        "version": "1.0",
        "added_tokens": [{"id": len(vocab), "content": "<|begin_of_text|>", "special": True},
                         {"id": len(vocab) + 1, "content": "<|eot_id|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": LLAMA3_PATTERN}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["Ġ t", "h e", "Ġt he", "i n", "in g"]},
    }
    put(t, "hf_json", b"\x04" + json.dumps(tok, ensure_ascii=False).encode())
    # Lines: a type byte (1 normal, 3 control) then the token in GPT-2 form; "m" lines are merges.
    lines = [b"\x01" + u[b].encode() for b in range(256)] + [b"\x01" + "he".encode(), b"\x03<|eot_id|>", b"mh e"]
    put(t, "gguf_vocab", b"\x05" + b"\n".join(lines))


if __name__ == "__main__":
    hf_corpus()
    meta_corpus()
    pickle_corpus()
    npy_corpus()
    safetensors_corpus()
    tokenizer_corpus()
