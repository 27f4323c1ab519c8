# Reference all-MiniLM-L6-v2 embeddings: HF `tokenizers` (the Rust tokenizer the
# Python library uses) + a float64 numpy BERT forward pass, mean pooling, L2 norm.
import json, sys, numpy as np
from safetensors.numpy import load_file
from tokenizers import Tokenizer
d = sys.argv[1]
W = {k: v.astype(np.float64) for k, v in load_file(d + "/model.safetensors").items()}
tok = Tokenizer.from_file(d + "/tokenizer.json")
tok.no_padding(); tok.enable_truncation(256)
def w(n):
    for p in ("", "bert."):
        if p + n in W: return W[p + n]
    raise KeyError(n)
def ln(x, g, b):
    m = x.mean(-1, keepdims=True); v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + 1e-12) * g + b
from math import erf
verf = np.vectorize(erf)
def embed(text):
    e = tok.encode(text); ids = np.array(e.ids); n = len(ids)
    x = w("embeddings.word_embeddings.weight")[ids] + w("embeddings.position_embeddings.weight")[:n] + w("embeddings.token_type_embeddings.weight")[0]
    x = ln(x, w("embeddings.LayerNorm.weight"), w("embeddings.LayerNorm.bias"))
    for l in range(6):
        p = f"encoder.layer.{l}."
        q = x @ w(p+"attention.self.query.weight").T + w(p+"attention.self.query.bias")
        k = x @ w(p+"attention.self.key.weight").T + w(p+"attention.self.key.bias")
        v = x @ w(p+"attention.self.value.weight").T + w(p+"attention.self.value.bias")
        h = 12; dh = 32
        q = q.reshape(n, h, dh).transpose(1, 0, 2); k = k.reshape(n, h, dh).transpose(1, 0, 2); v = v.reshape(n, h, dh).transpose(1, 0, 2)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(dh); s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
        a = (s @ v).transpose(1, 0, 2).reshape(n, 384)
        a = a @ w(p+"attention.output.dense.weight").T + w(p+"attention.output.dense.bias")
        x = ln(a + x, w(p+"attention.output.LayerNorm.weight"), w(p+"attention.output.LayerNorm.bias"))
        i = x @ w(p+"intermediate.dense.weight").T + w(p+"intermediate.dense.bias")
        i = 0.5 * i * (1 + verf(i / np.sqrt(2)))
        o = i @ w(p+"output.dense.weight").T + w(p+"output.dense.bias")
        x = ln(o + x, w(p+"output.LayerNorm.weight"), w(p+"output.LayerNorm.bias"))
    m = x.mean(0); m /= np.linalg.norm(m)
    return e.ids, m
out = []
for s in json.load(open(sys.argv[2])):
    ids, v = embed(s)
    out.append({"text": s, "token_ids": ids, "embedding": [round(float(f), 6) for f in v]})
json.dump(out, open(sys.argv[3], "w"))
